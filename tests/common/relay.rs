//! A TCP relay in front of a broker, to cut every connection through it and
//! later let them through again: what a network outage looks like to a client.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct Relay {
    /// The port clients connect to.
    pub port: u16,
    target: SocketAddr,
    /// The accepting task and every connection's copying task.
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Relay {
    /// Relays `port` (on loopback) to `target`, from now on.
    pub async fn start(port: u16, target: SocketAddr) -> Self {
        let relay = Self { port, target, tasks: Arc::default() };
        relay.open().await;
        relay
    }

    /// Lets connections through again, on the same port.
    pub async fn open(&self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.expect("the relay's port");
        let (target, tasks) = (self.target, self.tasks.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let copying = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                tasks.lock().unwrap().push(copying);
            }
        });
        self.tasks.lock().unwrap().push(accepting);
    }

    /// Cuts every connection and refuses new ones (the port is closed).
    pub fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
    }
}
