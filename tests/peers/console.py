"""weir's web console in a real browser: Debian's headless Chromium driven
by Selenium through chromedriver. Walks the console as a tenant would (and
another tenant, and the admin), runs axe-core's accessibility check in every
page, and prints what it saw as JSON for tests/console.rs to check. On a
failure it saves a screenshot and says where.

    console.py URL BOOTSTRAP TENANT_TOKEN OTHER_TENANT_TOKEN ADMIN_TOKEN
"""

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager downloads nothing here

from confluent_kafka import Producer
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import WebDriverWait

url, bootstrap, token, other, admin = sys.argv[1:6]
AXE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_modules", "axe-core", "axe.min.js")


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,720"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait(driver, condition, what, seconds=30):
    try:
        # The live pages redraw as they like: an element gone between finding and reading it is looked for again.
        return WebDriverWait(driver, seconds, ignored_exceptions=[StaleElementReferenceException]).until(condition)
    except TimeoutException:
        raise SystemExit(f"timed out waiting for {what}; the page says:\n{driver.find_element(By.TAG_NAME, 'body').text}")


def text_of(driver, css):
    """The visible text of what `css` selects, read in one go inside the page (a live page may redraw between two reads)."""
    return driver.execute_script("return Array.from(document.querySelectorAll(arguments[0]), (e) => e.innerText.trim())", css)


def main_text(driver):
    return driver.find_element(By.ID, "main").text


def sign_in(driver, with_token):
    field = wait(driver, seen.element_to_be_clickable((By.ID, "token")), "the sign-in form")
    field.clear()
    field.send_keys(with_token, Keys.ENTER)


def fetch_status(driver, method, path, csrf=False):
    """What the API answers a request the page makes with its cookie (and, if asked, its CSRF token)."""
    return driver.execute_async_script(
        """const [method, path, csrf, done] = arguments;
        const headers = {"Content-Type": "application/json"};
        const go = async () => {
          if (csrf) headers["X-CSRF-Token"] = (await (await fetch("/console/session")).json()).csrf;
          const r = await fetch(path, {method, headers, body: method === "GET" ? undefined : JSON.stringify({name: "made-by-a-page"})});
          done(r.status);
        };
        go().catch((e) => done(String(e)));""", method, path, csrf)


def accessibility(driver, page, found):
    """axe-core's serious and critical violations in the page as it is now."""
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        with open(AXE) as f:
            driver.execute_script(f.read())
    found[page] = driver.execute_async_script(
        """const done = arguments[0];
        axe.run(document, {resultTypes: ["violations"]}).then((r) => done(r.violations
          .filter((v) => v.impact === "serious" || v.impact === "critical")
          .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`)));""")


def produce(first, count):
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + count):
        value = {"event_id": f"evt-{i}", "user_id": i % 50, "url": "/docs", "ts": "2026-11-29T10:00:00Z", "duration_ms": i}
        producer.produce("clicks", json.dumps(value).encode())
    producer.flush(30)


def committed_batches(driver):
    return sum(1 for row in text_of(driver, "main table tbody tr") if "committed" in row.split())


seen_ = {"accessibility": {}}
checked = seen_["accessibility"]
with tempfile.TemporaryDirectory() as profile:
    driver = browser(profile)
    try:
        driver.get(url + "/")
        field = wait(driver, seen.presence_of_element_located((By.ID, "token")), "the sign-in form")
        seen_["token_field_type"] = field.get_attribute("type")
        seen_["token_label"] = driver.find_element(By.CSS_SELECTOR, "label[for=token]").text
        accessibility(driver, "sign-in", checked)

        sign_in(driver, "weir_" + "0" * 40)
        wait(driver, lambda d: d.find_element(By.ID, "sign-in-error").text, "the refusal")
        seen_["refused"] = driver.find_element(By.ID, "sign-in-error").text

        sign_in(driver, token)
        wait(driver, lambda d: "tenant" in d.find_element(By.ID, "who").text, "signing in")
        seen_["who"] = driver.find_element(By.ID, "who").text
        seen_["cookie_visible_to_script"] = driver.execute_script("return document.cookie")
        seen_["token_in_page"] = token in driver.page_source
        seen_["storage"] = driver.execute_script("return localStorage.length + sessionStorage.length")

        # The publishers, live: one consuming, the other (its plugin traps) retrying.
        wait(driver, lambda d: any("consuming" in t for t in text_of(d, "tbody tr")), "a consuming publisher")
        wait(driver, lambda d: any("retrying" in t for t in text_of(d, "tbody tr")), "the trapping publisher retrying")
        seen_["publishers"] = text_of(driver, "tbody tr")
        seen_["activity_charts"] = len(driver.find_elements(By.CSS_SELECTOR, "tbody svg.chart.small"))
        width = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        seen_["overflow_at_1280"] = width[0] > width[1]
        accessibility(driver, "publishers", checked)

        # Keyboard only: tab to the publisher's link and open it.
        link = driver.find_element(By.LINK_TEXT, "events/read_clicks")
        for _ in range(30):
            ActionChains(driver).send_keys(Keys.TAB).perform()
            if driver.switch_to.active_element == link:
                break
        seen_["link_reached_by_keyboard"] = driver.switch_to.active_element == link
        ActionChains(driver).send_keys(Keys.ENTER).perform()
        wait(driver, lambda d: committed_batches(d) >= 1 and "Plugin and connection" in main_text(d),
             "the publisher's batches, plugin and connection")
        seen_["publisher_page"] = main_text(driver)
        seen_["chart_bars"] = len(driver.find_elements(By.CSS_SELECTOR, "svg.chart rect"))
        # The declaration, opened, stays open across the page's refreshes.
        driver.find_element(By.XPATH, "//summary[text()='Declaration']").click()
        # More messages: a new batch appears without a reload.
        produce(1000, 10)
        wait(driver, lambda d: committed_batches(d) >= 2, "a second batch, live")
        seen_["batches_live"] = committed_batches(driver)
        seen_["declaration"] = driver.find_element(By.CSS_SELECTOR, "pre.declaration").text
        accessibility(driver, "publisher", checked)

        # Its dead letters, shown as text: the markup inside one stays text.
        driver.find_element(By.LINK_TEXT, "Dead letters").click()
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.dead-letter"), "the dead letters")
        seen_["dead_letters"] = text_of(driver, "tr.dead-letter td.payload")
        seen_["dead_letter_reasons"] = text_of(driver, "tr.dead-letter td.error")
        seen_["injected"] = driver.execute_script(
            "return [window.__pwned === undefined ? null : window.__pwned, document.querySelectorAll('main img, main script').length]")
        accessibility(driver, "dead letters", checked)
        reason = driver.find_element(By.ID, "reason")
        reason.send_keys("user_id")
        reason.send_keys(Keys.ENTER)
        wait(driver, lambda d: "reason=" in d.current_url and len(d.find_elements(By.CSS_SELECTOR, "tr.dead-letter")) < 3,
             "the filter")
        seen_["filtered"] = len(driver.find_elements(By.CSS_SELECTOR, "tr.dead-letter"))

        # A phone's width: nothing but the tables' own scrollers is wider than the screen.
        driver.set_window_size(390, 844)
        width = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        seen_["overflow_at_phone"] = width[0] > width[1]
        driver.set_window_size(1280, 720)

        # The table: its preview and versions.
        driver.get(url + "/#/tables")
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tbody a"), "the tables")
        seen_["tables"] = text_of(driver, "tbody a")
        accessibility(driver, "tables", checked)
        driver.find_element(By.LINK_TEXT, "events/clicks").click()
        wait(driver, lambda d: "Versions" in main_text(d) and len(d.find_elements(By.CSS_SELECTOR, "table")) >= 4,
             "the table page")
        seen_["table_page"] = main_text(driver)
        accessibility(driver, "table", checked)
        # A page of five rows, then the next five.
        driver.get(url + "/#/tables/events/clicks?limit=5")
        wait(driver, lambda d: "rows 1 to 5 of" in main_text(d), "a page of five rows")
        driver.find_element(By.LINK_TEXT, "Next rows").click()
        wait(driver, lambda d: "rows 6 to 10 of" in main_text(d), "the next page")
        seen_["next_page"] = text_of(driver, "main table")[1]

        # A change without the session's CSRF token is refused; with it, it is made.
        seen_["post_without_csrf"] = fetch_status(driver, "POST", "/v1/collections")
        seen_["post_with_csrf"] = fetch_status(driver, "POST", "/v1/collections", csrf=True)

        # Pause, then resume, each confirmed in its dialog.
        driver.get(url + "/#/publishers/events/read_clicks")
        for button, state in [("Pause", "paused"), ("Resume", "consuming")]:
            wait(driver, seen.element_to_be_clickable((By.XPATH, f"//button[text()='{button}']")), f"the {button} button").click()
            wait(driver, seen.alert_is_present(), "the confirmation")
            seen_[f"confirm_{state}"] = driver.switch_to.alert.text
            driver.switch_to.alert.accept()
            wait(driver, lambda d: main_text(d).split("worker", 1)[-1].strip().startswith(state), f"the {state} state", 60)
        seen_["paused_and_resumed"] = True

        # Signing out ends the session: the API refuses the cookie after.
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, seen.presence_of_element_located((By.ID, "token")), "the sign-in form after signing out")
        seen_["after_sign_out"] = fetch_status(driver, "GET", "/v1/publishers")

        # Another tenant sees none of it, and cannot reach it by its URL.
        sign_in(driver, other)
        wait(driver, lambda d: "No publishers yet" in main_text(d), "the other tenant's empty list")
        seen_["other_tenant"] = main_text(driver)
        driver.get(url + "/#/tables")
        wait(driver, lambda d: "No tables yet" in main_text(d), "the other tenant's tables")
        driver.get(url + "/#/publishers/events/read_clicks")
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "main .error"), "the other tenant's refusal")
        seen_["other_by_url"] = main_text(driver)
        seen_["other_by_url_status"] = fetch_status(driver, "GET", "/v1/collections/events/publishers/read_clicks")
        driver.find_element(By.ID, "sign-out").click()

        # The admin sees the tenants, their tokens and the audit log; makes a token and revokes it.
        sign_in(driver, admin)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "details.tenant"), "the tenants")
        seen_["tenants"] = text_of(driver, "details.tenant summary")
        wait(driver, lambda d: "console.sign-in" in main_text(d), "the audit log")
        seen_["audit"] = main_text(driver).split("Audit log", 1)[1]
        tenant = driver.find_element(By.CSS_SELECTOR, "details.tenant")
        tenant.find_element(By.TAG_NAME, "summary").click()
        tenant.find_element(By.XPATH, ".//button[text()='New token']").click()
        wait(driver, lambda d: "weir_" in tenant.find_element(By.CSS_SELECTOR, "output").text, "the new token")
        made = tenant.find_element(By.CSS_SELECTOR, "output code").text
        wait(driver, lambda d: len(tenant.find_elements(By.CSS_SELECTOR, "tr.token")) == 2, "the new token listed")
        accessibility(driver, "admin", checked)
        tenant.find_elements(By.XPATH, ".//button[text()='Revoke']")[-1].click()
        wait(driver, seen.alert_is_present(), "the confirmation")
        driver.switch_to.alert.accept()
        wait(driver, lambda d: len(tenant.find_elements(By.XPATH, ".//button[text()='Revoke']")) == 1, "the revocation")
        seen_["made_token"] = made
    except BaseException:
        shot = os.path.join(tempfile.gettempdir(), f"weir-console-failure-{int(time.time())}.png")
        try:
            driver.save_screenshot(shot)
            print(f"console.py failed; a screenshot of the page is at {shot}", file=sys.stderr)
        except Exception:
            pass
        raise
    finally:
        driver.quit()

print(json.dumps(seen_))
