// weir's web console in Firefox: Debian's firefox-esr, headless, driven over
// WebDriver BiDi by puppeteer-core (which downloads no browser). The same
// console console.py walks in Chromium, walked again where browsers differ:
// the sign-in form and its cookie, the live lists, a hostile dead letter
// shown as text, paging a table, the CSRF rule, signing out, another
// tenant's URL; axe-core in each page. Prints what it saw as JSON for
// tests/console.rs; on a failure, saves a screenshot and says where.
//
//     node console_firefox.mjs URL TENANT_TOKEN OTHER_TENANT_TOKEN

import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

const [url, token, other] = process.argv.slice(2);
const axe = readFileSync(new URL("./node_modules/axe-core/axe.min.js", import.meta.url), "utf8");
const seen = { accessibility: {} };

const browser = await puppeteer.launch({
  browser: "firefox",
  executablePath: process.env.WEIR_FIREFOX || "/usr/bin/firefox-esr",
  headless: true,
  defaultViewport: { width: 1280, height: 720 },
});
const page = await browser.newPage();

const mainText = () => page.$eval("#main", (m) => m.innerText);
const textOf = (css) => page.$$eval(css, (all) => all.map((e) => e.innerText.trim()));
async function until(what, check, seconds = 30) {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    try { if (await check()) return; } catch (_) { /* redrawn meanwhile: look again */ }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; the page says:\n${await page.$eval("body", (b) => b.innerText)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
async function accessibility(name) {
  // Evaluated by the browser's automation, not as a <script> the page's policy would refuse.
  if (!(await page.evaluate(() => typeof window.axe !== "undefined"))) await page.evaluate(axe);
  seen.accessibility[name] = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
  });
}
const fetchStatus = (method, path, csrf) => page.evaluate(async (method, path, csrf) => {
  const headers = { "Content-Type": "application/json" };
  if (csrf) headers["X-CSRF-Token"] = (await (await fetch("/console/session")).json()).csrf;
  const r = await fetch(path, { method, headers, body: method === "GET" ? undefined : JSON.stringify({ name: "made-in-firefox" }) });
  return r.status;
}, method, path, csrf);
async function signIn(with_) {
  await page.waitForSelector("#token");
  await page.type("#token", with_);
  await page.keyboard.press("Enter");
}

try {
  seen.browser = await browser.version();
  await page.goto(`${url}/`);
  await signIn(token);
  await until("signing in", async () => (await page.$eval("#who", (w) => w.textContent)).includes("tenant"));
  seen.who = await page.$eval("#who", (w) => w.textContent);
  seen.cookie_visible_to_script = await page.evaluate(() => document.cookie);
  seen.token_in_page = (await page.content()).includes(token);

  await until("a consuming publisher", async () => (await textOf("tbody tr")).some((t) => t.includes("consuming")));
  seen.publishers = await textOf("tbody tr");
  seen.activity_charts = (await page.$$("tbody svg.chart.small")).length;
  await accessibility("publishers");

  await page.goto(`${url}/#/publishers/events/read_clicks`);
  await until("the publisher's batches", async () => (await mainText()).includes("Plugin and connection")
    && (await textOf("main table tbody tr")).some((r) => r.split(/\s+/).includes("committed")));
  seen.publisher_page = await mainText();
  await accessibility("publisher");

  await page.goto(`${url}/#/dead-letters/events/read_clicks`);
  await until("the dead letters", async () => (await page.$$("tr.dead-letter")).length > 0);
  seen.dead_letters = await textOf("tr.dead-letter td.payload");
  seen.injected = await page.evaluate(() => [window.__pwned === undefined ? null : window.__pwned, document.querySelectorAll("main img, main script").length]);
  await accessibility("dead letters");

  await page.goto(`${url}/#/tables/events/clicks?limit=5`);
  await until("a page of five rows", async () => (await mainText()).includes("rows 1 to 5 of"));
  await accessibility("table");
  await page.click("xpath/.//a[text()='Next rows']");
  await until("the next page", async () => (await mainText()).includes("rows 6 to 10 of"));
  seen.next_page = (await textOf("main table"))[1];

  seen.post_without_csrf = await fetchStatus("POST", "/v1/collections", false);
  seen.post_with_csrf = await fetchStatus("POST", "/v1/collections", true);

  await page.click("#sign-out");
  await page.waitForSelector("#token");
  seen.after_sign_out = await fetchStatus("GET", "/v1/publishers", false);

  await signIn(other);
  await until("the other tenant's empty list", async () => (await mainText()).includes("No publishers yet"));
  await page.goto(`${url}/#/publishers/events/read_clicks`);
  await until("the other tenant's refusal", async () => (await page.$$("main .error")).length > 0);
  seen.other_by_url = await mainText();
  seen.other_by_url_status = await fetchStatus("GET", "/v1/collections/events/publishers/read_clicks", false);
} catch (e) {
  const shot = join(tmpdir(), `weir-console-firefox-${process.pid}.png`);
  await page.screenshot({ path: shot }).catch(() => {});
  console.error(`${e.stack || e}\nscreenshot: ${shot}`);
  await browser.close();
  process.exit(1);
}
await browser.close();
console.log(JSON.stringify(seen));
