//! A publisher as its owner declares it: the declaration (`declaration`,
//! name, flush interval, output tables, the plugin) and its source's settings
//! (`source`: the topic, format, schema and when a batch closes), which the
//! CLI, the server and the workers all read.

pub mod declaration;
pub mod source;
