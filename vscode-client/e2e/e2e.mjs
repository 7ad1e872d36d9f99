// Drives code-server (VS Code 1.100) in headless Chromium and checks the Grounding extension
// the way a writer would see it. Started by run.sh, which passes everything through E2E_* env.
//
// Checks (each reported PASS/FAIL; exit status 1 if any failed):
//   untrusted    with trust declined, opening the draft starts no server; status bar + warning say so
//   activation   granting trust (Manage Workspace Trust > Trust) starts the server; a status arrives
//   problems     the Problems panel lists every expected GR code for the draft
//   hover        hovering a stale citation shows the cited source line's text
//   image-hover  hovering an image citation (DOC_ID@VERSION#rN, in E2E_IMAGE_DRAFT) shows the region
//                cropped from the PNG as an image (a decoded data: URI) and its measured attributes
//   quickfix     Ctrl+. on a stale citation offers "Re-anchor"; applying it removes that error
//   statusbar    the status bar shows the draft's status (answered/partial/abstain/conflict)
//   commands     "Reindex evidence" and "Show field conflicts" reach the server and show results
//   settings     changing grounding.strict restarts the server with it in initializationOptions
//   trust-notice the "not trusted" notification's link opens the trust editor, and granting trust
//                removes the notification (from the toasts and the notification center)
//   old-version  Go to Definition on a stale citation opens the old version read-only, as Markdown
//   no-spinner   a Markdown file that is not a draft (README.md) shows no Grounding status item
//   answer-new   "Draft an answer" with no draft open opens exactly one new untitled draft
//   answer-draft "Draft an answer" in an open draft inserts into it: no new tab; the notification
//                reads "status: <status>"
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { chromium } from 'playwright-core';

const env = process.env;
const URL_BASE = env.E2E_URL ?? 'http://127.0.0.1:18765';
const WORKSPACE = path.resolve(env.E2E_WORKSPACE ?? 'examples');
const EXPECT_CODES = (env.E2E_EXPECT_CODES ?? 'GR104').split(/[ ,]+/).filter(Boolean);
const TIMEOUT = Number(env.E2E_TIMEOUT ?? '90') * 1000;
const SHOTS = env.E2E_SCREENSHOTS ?? path.resolve('screenshots');
const PROFILE = env.E2E_CHROMIUM_PROFILE ?? fs.mkdtempSync('/tmp/e2e-chromium-');
const GROUNDING = env.E2E_GROUNDING ?? 'grounding';
const STATUSES = ['answered', 'partial', 'abstain', 'conflict'];
const USER_DATA = env.E2E_USER_DATA; // code-server's --user-data-dir: settings and logs
const IMAGE_DRAFT = env.E2E_IMAGE_DRAFT ?? 'answers/panel-lights.md';

const t0 = Date.now();
const log = (msg) => console.log(`[e2e.mjs ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
const results = [];
function record(name, ok, detail) {
  results.push({ name, ok, detail });
  log(`${ok ? 'PASS' : 'FAIL'} ${name}: ${detail}`);
}

let shotIndex = 0;
async function shot(page, name) {
  shotIndex += 1;
  const file = path.join(SHOTS, `${String(shotIndex).padStart(2, '0')}-${name}.png`);
  try {
    await page.screenshot({ path: file });
    log(`screenshot ${path.relative(process.cwd(), file)}`);
  } catch (error) {
    log(`screenshot ${name} failed: ${error.message}`);
  }
}

/** The draft to open: E2E_DRAFT if it exists, else one with a GR104 finding, else answers/*stale*.md. */
function discoverDraft() {
  const wanted = env.E2E_DRAFT ?? 'answers/stale.md';
  if (fs.existsSync(path.join(WORKSPACE, wanted))) {
    return wanted;
  }
  log(`${wanted} does not exist in ${WORKSPACE}: looking for a draft with a stale citation`);
  const run = spawnSync(GROUNDING, ['check', '--root', WORKSPACE, '--format', 'json'], {
    cwd: WORKSPACE,
    encoding: 'utf8',
    timeout: 120000,
  });
  try {
    const report = JSON.parse(run.stdout);
    for (const draft of report.drafts ?? []) {
      if ((draft.diagnostics ?? []).some((d) => d.code === 'GR104')) {
        log(`grounding check found GR104 in ${draft.path}`);
        return draft.path;
      }
    }
  } catch {
    log(`grounding check --format json gave no report (exit ${run.status}): ${(run.stderr ?? '').slice(0, 300)}`);
  }
  const answers = path.join(WORKSPACE, 'answers');
  const stale = fs.existsSync(answers) ? fs.readdirSync(answers).filter((f) => /stale.*\.md$/.test(f)).sort() : [];
  if (stale.length > 0) {
    return `answers/${stale[0]}`;
  }
  throw new Error(`no draft with a stale citation found in ${WORKSPACE}`);
}

/** What the CLI says about the draft (expected status), or undefined when it cannot tell. */
function cliReport(draft) {
  const run = spawnSync(GROUNDING, ['check', '--root', WORKSPACE, '--format', 'json', draft], {
    cwd: WORKSPACE,
    encoding: 'utf8',
    timeout: 120000,
  });
  try {
    const report = JSON.parse(run.stdout);
    return (report.drafts ?? []).find((d) => d.path === draft) ?? report.drafts?.[0];
  } catch {
    return undefined;
  }
}

/** Text of every *Grounding* output channel log under the user-data dir (all sessions). */
function outputChannelLogs() {
  const out = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(p);
      } else if (/Grounding\.log$/.test(entry.name)) {
        out.push(fs.readFileSync(p, 'utf8'));
      }
    }
  };
  const logs = path.join(USER_DATA ?? '', 'logs');
  if (USER_DATA !== undefined && fs.existsSync(logs)) {
    walk(logs);
  }
  return out.join('\n');
}

/** The CLI's conflict list (grounding conflicts --format json), or undefined. */
function cliConflicts() {
  const run = spawnSync(GROUNDING, ['conflicts', '--root', WORKSPACE, '--format', 'json'], {
    cwd: WORKSPACE,
    encoding: 'utf8',
    timeout: 120000,
  });
  try {
    const list = JSON.parse(run.stdout);
    return Array.isArray(list) ? list : undefined;
  } catch {
    return undefined;
  }
}

async function waitFor(what, fn, timeout = TIMEOUT, interval = 500) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) {
      return last;
    }
    await new Promise((r) => setTimeout(r, interval));
  }
  throw new Error(`timed out after ${timeout / 1000}s waiting for ${what}`);
}

/**
 * Runs a command through the command palette (F1) by its visible title, exactly: "View: Close
 * Editor" must not run "View: Close Editor Group", which the palette may list first.
 */
async function runCommand(page, title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: 10000 });
  await input.fill(`>${title}`);
  const exact = new RegExp(`^${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
  const row = page
    .locator('.quick-input-list .monaco-list-row', { has: page.locator('.label-name', { hasText: exact }) })
    .first();
  await row.waitFor({ state: 'visible', timeout: 10000 });
  await row.click();
}

/** Texts of the notification toasts on screen. */
async function toasts(page) {
  return page
    .locator('.notifications-toasts .notification-list-item-message')
    .allTextContents()
    .catch(() => []);
}

/**
 * Opens a file through Quick Open (Ctrl+P) and waits for its tab. Quick Open can close again
 * before it is typed in (a toast or a restarting language server takes the focus: seen once in
 * CI, "element is not visible" for 30 s), so it is opened again, at most three times.
 */
async function openFile(page, relPath) {
  const input = page.locator('.quick-input-widget input');
  for (let attempt = 1; ; attempt += 1) {
    await page.keyboard.press('Control+P');
    try {
      await input.waitFor({ state: 'visible', timeout: 10000 });
      await input.fill(relPath, { timeout: 5000 });
      break;
    } catch (error) {
      if (attempt === 3) throw error;
      log(`Quick Open closed before "${relPath}" was typed (attempt ${attempt}); opening it again`);
      await page.keyboard.press('Escape');
    }
  }
  const base = path.basename(relPath);
  await page
    .locator('.quick-input-list .monaco-list-row', { hasText: base })
    .first()
    .waitFor({ state: 'visible', timeout: 20000 });
  await page.keyboard.press('Enter');
  await page.locator(`.tabs-container .tab.active[aria-label^="${base}"]`).first().waitFor({ timeout: 20000 });
  await page.locator('.editor-instance .monaco-editor .view-lines').first().waitFor({ timeout: 20000 });
}

/** Moves the cursor with Go to Line/Column (Ctrl+G), 1-based. */
async function gotoPosition(page, line, column) {
  await page.locator('.editor-instance .monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: 10000 });
  // Ctrl+G opens Quick Open with the ':' (go to line) prefix already typed.
  await input.fill(`:${line}:${column}`);
  await page.waitForTimeout(200);
  await page.keyboard.press('Enter');
  await page.waitForTimeout(300);
}

/**
 * Rows of the Problems panel (opening it if needed), each with the file it is listed under:
 * [{file: "answers/x.md" | null, code: "GR104" | null, line, column, text}]. Related-information
 * rows have code null.
 */
async function problems(page) {
  const panel = page.locator('.markers-panel');
  if (!(await panel.isVisible().catch(() => false))) {
    await page.keyboard.press('Control+Shift+M');
    await panel.waitFor({ state: 'visible', timeout: 10000 });
  }
  return page.evaluate(() => {
    const rows = [...document.querySelectorAll('.markers-panel .monaco-list-row')];
    let file = null;
    const out = [];
    for (const row of rows) {
      const label = row.getAttribute('aria-label') ?? '';
      const text = (row.textContent ?? '').trim();
      const header = /problems? in file (.+?) of folder (.+)$/.exec(label);
      if (header) {
        file = `${header[2]}/${header[1]}`;
        continue;
      }
      const header2 = /problems? in file (.+)$/.exec(label);
      if (header2) {
        file = header2[1];
        continue;
      }
      const code = /\(?(GR\d{3})\)?/.exec(text)?.[1] ?? null;
      const pos = /\[Ln (\d+), Col (\d+)\]/.exec(text);
      out.push({
        file,
        code,
        line: pos ? Number(pos[1]) : null,
        column: pos ? Number(pos[2]) : null,
        text: `${label} || ${text}`.slice(0, 300),
      });
    }
    return out;
  });
}

/** Citation definition lines of the draft: [{line (1-based), column of the id, id, quote}]. */
function citations(text) {
  const out = [];
  text.split(/\r\n|\r|\n/).forEach((lineText, i) => {
    const m = /^\[\^([^\]]+)\]: (\S+) sha256:[0-9a-f]+ "(.*)"\s*$/.exec(lineText);
    if (m) {
      out.push({ line: i + 1, column: lineText.indexOf(m[2]) + 1, label: m[1], id: m[2], quote: m[3] });
    }
  });
  return out;
}

/** The visible Grounding status bar item whose accessible label starts with `prefix`, or null. */
async function statusBarItem(page, prefix = 'Grounding') {
  return page.evaluate((p) => {
    const el = [...document.querySelectorAll('.statusbar-item [aria-label], .statusbar-item[aria-label]')].find(
      (e) => (e.getAttribute('aria-label') ?? '').startsWith(p) && e.checkVisibility(),
    );
    if (!el) {
      return null;
    }
    return { label: el.getAttribute('aria-label') ?? '', text: (el.textContent ?? '').trim() };
  }, prefix);
}

/** The status bar's language mode item ("Markdown", "Plain Text", ...), or null. */
async function languageMode(page) {
  const item = page.locator('[id="status.editor.mode"]');
  return (await item.count()) > 0 ? ((await item.first().textContent()) ?? '').trim() : null;
}

/** Accessible labels of the editor tabs, in order. */
async function tabLabels(page) {
  return page.locator('.tabs-container .tab').evaluateAll((tabs) => tabs.map((t) => t.getAttribute('aria-label') ?? ''));
}

/** The active editor's visible lines (no-break spaces as spaces). */
async function visibleLines(page) {
  return (await page.locator('.editor-instance .monaco-editor .view-line').allTextContents()).map((l) =>
    l.replace(/\u00a0/g, ' '),
  );
}

/** Focuses the tab whose label starts with `base` and waits until it is active. */
async function focusTab(page, base) {
  await page.locator(`.tabs-container .tab[aria-label^="${base}"]`).first().click();
  await page.locator(`.tabs-container .tab.active[aria-label^="${base}"]`).first().waitFor({ timeout: 10000 });
}

/** Answers the two input boxes of "Grounding: Draft an answer". */
async function draftAnswer(page, question, fields) {
  await runCommand(page, 'Grounding: Draft an answer');
  const input = page.locator('.quick-input-widget input');
  for (const [step, value] of [
    ['1/2', question],
    ['2/2', fields],
  ]) {
    await page.locator('.quick-input-widget .quick-input-title', { hasText: step }).waitFor({ state: 'visible', timeout: 10000 });
    await input.fill(value);
    await page.keyboard.press('Enter');
  }
}

/** Texts in the notification center (opened and closed again). */
async function notificationCenter(page) {
  await runCommand(page, 'Notifications: Show Notifications');
  const center = page.locator('.notifications-center');
  await center.waitFor({ state: 'visible', timeout: 10000 });
  return center.locator('.notification-list-item-message').allTextContents();
}

async function main() {
  const draft = discoverDraft();
  const draftText = fs.readFileSync(path.join(WORKSPACE, draft), 'utf8');
  const cites = citations(draftText);
  const expected = cliReport(draft);
  log(`workspace ${WORKSPACE}`);
  log(`draft ${draft}: ${cites.length} citation definitions; CLI status: ${expected?.status ?? 'unknown'}`);
  fs.mkdirSync(SHOTS, { recursive: true });

  const context = await chromium.launchPersistentContext(PROFILE, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1600, height: 1000 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => log(`page error: ${error.message}`));
  try {
    // --- open the folder
    const url = `${URL_BASE}/?folder=${encodeURIComponent(WORKSPACE)}`;
    log(`opening ${url}`);
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60000 });
    await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
    await page.locator('.statusbar').waitFor({ timeout: 60000 });
    log(`workbench loaded: ${await page.title()}`);
    await shot(page, 'workbench');

    // --- restricted mode: decline the startup trust prompt, open the draft: the server must not
    // start, and the user is told (status bar item + warning)
    let trustLink = false;
    const noTrustButton = page.getByRole('button', { name: /No, I don't trust the authors/i });
    let dialog = false;
    try {
      await noTrustButton.waitFor({ state: 'visible', timeout: 30000 });
      dialog = true;
    } catch {
      log('no trust dialog appeared (workspace already trusted?)');
    }
    if (dialog) {
      await shot(page, 'trust-dialog');
      await noTrustButton.click();
      log('declined the trust prompt: Restricted Mode');
      await openFile(page, draft);
      log(`opened ${draft} in Restricted Mode`);
      try {
        const item = await waitFor(
          'the restricted-mode status bar item',
          async () => (await statusBarItem(page, 'Grounding: restricted')) ?? null,
          20000,
        );
        const toast = await waitFor(
          'the "not trusted" notification',
          async () => (await toasts(page)).find((t) => /not trusted/i.test(t)) ?? null,
          20000,
        );
        const started = outputChannelLogs().includes('server started');
        record(
          'untrusted',
          !started,
          `status bar "${item.text}" (${item.label}); notification "${toast.trim().slice(0, 90)}…"` +
            (started ? '; BUT the output channel says the server started' : '; server not started'),
        );
      } catch (error) {
        record('untrusted', false, error.message);
      }
      await shot(page, 'restricted-mode');
      // --- grant trust as a person would: the notification's "Manage Workspace Trust" link (else
      // the command of that name), then "Trust"
      const link = page.locator('.notifications-toasts .notification-list-item-message a', {
        hasText: 'Manage Workspace Trust',
      });
      trustLink = (await link.count()) > 0;
      if (trustLink) {
        await link.first().click();
        log('clicked "Manage Workspace Trust" in the Grounding notification');
      } else {
        log('the Grounding notification has no "Manage Workspace Trust" link: using the command');
        await runCommand(page, 'Workspaces: Manage Workspace Trust');
      }
      const trust = page.locator('.workspace-trust-editor').getByRole('button', { name: /^Trust$/ }).first();
      await trust.waitFor({ state: 'visible', timeout: 20000 });
      await shot(page, 'trust-editor');
      await trust.click();
      log('workspace trusted');
      await page.locator(`.tabs-container .tab[aria-label^="${path.basename(draft)}"]`).first().click();
    } else {
      await openFile(page, draft);
    }
    await page.locator(`.tabs-container .tab.active[aria-label^="${path.basename(draft)}"]`).first().waitFor({ timeout: 20000 });
    log(`${draft} is the active editor`);
    await shot(page, 'draft-open');

    // --- activation: once trusted, the server starts and reports the draft's status
    try {
      const item = await waitFor('a status from the server', () => statusBarItem(page, 'Grounding status:'), TIMEOUT);
      record('activation', true, `server started on trust; status bar item "${item.text}"`);
    } catch (error) {
      const item = await statusBarItem(page).catch(() => null);
      record('activation', false, `${error.message}; item: ${JSON.stringify(item)}`);
    }

    // --- the "not trusted" notification is gone once trust is granted: no toast, and not kept
    // in the notification center either
    if (dialog) {
      try {
        const notTrusted = (texts) => texts.filter((t) => /not trusted/i.test(t));
        await waitFor('the "not trusted" toast to go away', async () => notTrusted(await toasts(page)).length === 0, 20000);
        const center = await notificationCenter(page);
        await shot(page, 'trust-granted-notifications');
        await runCommand(page, 'Notifications: Hide Notifications');
        await focusTab(page, path.basename(draft));
        const left = notTrusted(center);
        record(
          'trust-notice',
          trustLink && left.length === 0,
          (trustLink ? 'its "Manage Workspace Trust" link opened the trust editor' : 'it had no "Manage Workspace Trust" link') +
            `; after the grant no toast says "not trusted"; notification center: ${
              left.length === 0 ? `${center.length} other notification(s)` : `still lists ${JSON.stringify(left)}`
            }`,
        );
      } catch (error) {
        record('trust-notice', false, `${error.message}; toasts: ${JSON.stringify(await toasts(page))}`);
        await shot(page, 'trust-notice-failure');
      }
    }

    // --- Problems panel: the draft's rows must carry every expected code
    const ofDraft = (r) => r.file === draft || (r.file !== null && r.file.endsWith(`/${path.basename(draft)}`));
    let rows = [];
    try {
      rows = await waitFor(`Problems to list ${EXPECT_CODES.join(', ')} for ${draft}`, async () => {
        const r = (await problems(page)).filter(ofDraft);
        const codes = new Set(r.map((x) => x.code));
        return EXPECT_CODES.every((c) => codes.has(c)) ? r : null;
      });
      const listed = rows.filter((r) => r.code !== null).map((r) => `${r.code}@${r.line}:${r.column}`);
      record('problems', true, `${draft}: ${listed.join(', ')}`);
    } catch (error) {
      const all = await problems(page).catch(() => []);
      rows = all.filter(ofDraft);
      const seen = all.filter((r) => r.code !== null).map((r) => `${r.file}:${r.code}`);
      record('problems', false, `${error.message}; the panel lists: ${JSON.stringify(seen)}`);
    }
    await shot(page, 'problems');

    // --- status bar: the draft's status, as the CLI computes it when the CLI can tell
    const want = STATUSES.includes(expected?.status) ? [expected.status] : STATUSES;
    try {
      const item = await waitFor(
        `the status bar to show ${want.join('|')}`,
        async () => {
          const it = await statusBarItem(page, 'Grounding status:');
          return it && want.some((s) => it.label.includes(`status: ${s},`)) ? it : null;
        },
        30000,
      );
      record('statusbar', true, `"${item.text}" (${item.label})`);
    } catch (error) {
      const item = await statusBarItem(page).catch(() => null);
      record('statusbar', false, `${error.message}; item: ${JSON.stringify(item)}`);
    }
    await shot(page, 'statusbar');

    // --- hover on a stale citation
    const staleLines = new Set(rows.filter((r) => r.code === 'GR104').map((r) => r.line));
    const staleCites = cites.filter((c) => staleLines.size === 0 || staleLines.has(c.line));
    const hoverTarget = staleCites[0] ?? cites[0];
    if (hoverTarget === undefined) {
      record('hover', false, 'the draft has no citation definition line');
    } else {
      try {
        await gotoPosition(page, hoverTarget.line, hoverTarget.column + 1);
        await page.keyboard.press('Control+K');
        await page.keyboard.press('Control+I');
        const sourceText = hoverTarget.quote.replace(/^[-*+] /, '');
        const hover = await waitFor(
          'a hover with the source line',
          async () => {
            const texts = await page.locator('.monaco-hover:visible').allTextContents().catch(() => []);
            const text = texts.join('\n');
            return text.includes(sourceText) ? text : null;
          },
          20000,
        );
        record('hover', true, `hover on ${hoverTarget.id} shows "${sourceText}" (${hover.length} chars)`);
      } catch (error) {
        const texts = await page.locator('.monaco-hover:visible').allTextContents().catch(() => []);
        record('hover', false, `${error.message}; hover text: ${JSON.stringify(texts.join(' | ').slice(0, 300))}`);
      }
      await shot(page, 'hover');
      await page.keyboard.press('Escape');
    }

    // --- hover on an image citation: the region cropped from the image, and its attributes
    const imageCites = fs.existsSync(path.join(WORKSPACE, IMAGE_DRAFT))
      ? citations(fs.readFileSync(path.join(WORKSPACE, IMAGE_DRAFT), 'utf8')).filter((c) => /#r\d+$/.test(c.id))
      : [];
    if (imageCites.length === 0) {
      record('image-hover', false, `${IMAGE_DRAFT} has no image citation (DOC_ID@VERSION#rN) in ${WORKSPACE}`);
    } else {
      const target = imageCites[0];
      try {
        await openFile(page, IMAGE_DRAFT);
        await gotoPosition(page, target.line, target.column + 1);
        await page.keyboard.press('Control+K');
        await page.keyboard.press('Control+I');
        const seen = await waitFor(
          'a hover with the cropped region as a loaded image and the quoted attribute',
          async () => {
            const hover = page.locator('.monaco-hover:visible').first();
            if ((await hover.count()) === 0) {
              return null;
            }
            const text = (await hover.textContent()) ?? '';
            const images = await hover.locator('img').evaluateAll((els) =>
              els.map((e) => ({ src: (e.getAttribute('src') ?? '').slice(0, 22), width: e.naturalWidth, height: e.naturalHeight })),
            );
            const crop = images.find((i) => i.src.startsWith('data:image/png') && i.width > 0 && i.height > 0);
            return crop && text.includes(target.quote) ? { text, crop } : null;
          },
          30000,
        );
        await page.waitForTimeout(300);
        await shot(page, 'image-hover');
        record(
          'image-hover',
          true,
          `hover on ${target.id} in ${IMAGE_DRAFT} shows a ${seen.crop.width}x${seen.crop.height} crop (${seen.crop.src}…) and "${target.quote}"`,
        );
      } catch (error) {
        const texts = await page.locator('.monaco-hover:visible').allTextContents().catch(() => []);
        const srcs = await page
          .locator('.monaco-hover:visible img')
          .evaluateAll((els) => els.map((e) => (e.getAttribute('src') ?? '').slice(0, 40)))
          .catch(() => []);
        record('image-hover', false, `${error.message}; hover text: ${JSON.stringify(texts.join(' | ').slice(0, 300))}; img: ${JSON.stringify(srcs)}`);
        await shot(page, 'image-hover-failure');
      }
      await page.keyboard.press('Escape');
      await runCommand(page, 'View: Close Editor').catch(() => {});
      await focusTab(page, path.basename(draft));
    }

    // --- Go to Definition on a stale citation: the old version opens read-only, as Markdown
    const oldTarget = staleCites.find((c) => staleLines.has(c.line));
    if (oldTarget === undefined) {
      record('old-version', false, 'the Problems panel lists no stale citation (GR104) to go to');
    } else {
      const version = oldTarget.id.replace(/:\d+$/, ''); // returns-policy@1
      try {
        await gotoPosition(page, oldTarget.line, oldTarget.column + 1);
        await runCommand(page, 'Go to Definition');
        const tab = page.locator(`.tabs-container .tab.active[aria-label*="${version}"]`).first();
        await tab.waitFor({ timeout: 20000 });
        const quote = oldTarget.quote;
        const lines = await waitFor(`${version} to show the cited line`, async () => {
          const l = await visibleLines(page);
          return l.some((x) => x === quote) ? l : null;
        }, 20000);
        const mode = await waitFor('the language mode Markdown', async () => ((await languageMode(page)) === 'Markdown' ? 'Markdown' : null), 10000).catch(
          async () => languageMode(page),
        );
        const label = (await tab.getAttribute('aria-label')) ?? '';
        await shot(page, 'old-version');
        record(
          'old-version',
          mode === 'Markdown',
          `Go to Definition on ${oldTarget.id} opened "${label}" (${lines.length} visible lines, the cited line "${quote}" among them); language mode: ${mode}`,
        );
        await runCommand(page, 'View: Close Editor');
      } catch (error) {
        record('old-version', false, `${error.message}; tabs: ${JSON.stringify(await tabLabels(page))}; language: ${await languageMode(page)}`);
        await shot(page, 'old-version-failure');
      }
      await focusTab(page, path.basename(draft));
    }

    // --- quick fix "Re-anchor" on a stale citation that can be re-anchored
    const staleOn = async (line) =>
      (await problems(page)).filter((r) => ofDraft(r) && r.code === 'GR104' && r.line === line).length;
    const editorLine = async (label) =>
      (await page.locator('.editor-instance .monaco-editor .view-line').allTextContents())
        .map((l) => l.replace(/\u00a0/g, ' '))
        .find((l) => l.startsWith(`[^${label}]:`)) ?? '';
    let fixed = false;
    const tried = [];
    for (const cite of staleCites) {
      const before = await staleOn(cite.line);
      await gotoPosition(page, cite.line, cite.column + 1);
      await page.keyboard.press('Control+.');
      const menu = page.locator('.action-widget');
      try {
        await menu.waitFor({ state: 'visible', timeout: 10000 });
        await page.waitForTimeout(500);
      } catch {
        tried.push(`${cite.id}: no code action menu`);
        continue;
      }
      // Headers ("Quick Fix") are not focusable; the arrow keys move over the actions only.
      const actions = await menu.evaluate((el) =>
        [...el.querySelectorAll('.monaco-list-row')]
          .filter((row) => !row.classList.contains('group-header') && !row.classList.contains('separator'))
          .map((row) => (row.textContent ?? '').trim()),
      );
      tried.push(`${cite.id}: ${JSON.stringify(actions)}`);
      const index = actions.findIndex((a) => /re-?anchor/i.test(a));
      if (index < 0) {
        await page.keyboard.press('Escape');
        continue;
      }
      await shot(page, 'quickfix-menu');
      for (let i = 0; i < index; i++) {
        await page.keyboard.press('ArrowDown');
      }
      await page.keyboard.press('Enter');
      fixed = true;
      try {
        const after = await waitFor(
          `the citation on line ${cite.line} to change`,
          async () => {
            const text = await editorLine(cite.label);
            return text !== '' && !text.includes(cite.id) ? text : null;
          },
          15000,
        );
        if (before === 0) {
          record('quickfix', false, `"${actions[index]}" rewrote line ${cite.line} to: ${after}; but the Problems panel had no GR104 on that line before the fix, so its removal is unproven`);
        } else {
          await waitFor(`the GR104 on line ${cite.line} to go away`, async () => (await staleOn(cite.line)) === 0, 30000);
          record('quickfix', true, `"${actions[index]}" on ${cite.id}: the GR104 on line ${cite.line} is gone; the line now reads: ${after}`);
        }
      } catch (error) {
        record('quickfix', false, `applied "${actions[index]}" on ${cite.id}: ${error.message}; line now: ${await editorLine(cite.label)}`);
      }
      await shot(page, 'after-quickfix');
      break;
    }
    if (!fixed) {
      record('quickfix', false, `no "Re-anchor" code action on any stale citation; menus: ${tried.join('; ') || 'none tried'}`);
      await shot(page, 'no-quickfix');
    }

    // --- commands forwarded with workspace/executeCommand: reindex, then show conflicts
    try {
      await page.keyboard.press('Escape');
      await runCommand(page, 'Grounding: Reindex evidence');
      const toast = await waitFor(
        'the "evidence reindexed" notification',
        async () => (await toasts(page)).find((t) => /reindexed/i.test(t)) ?? null,
        60000,
      );
      await shot(page, 'reindex');
      const expectedConflicts = cliConflicts();
      await runCommand(page, 'Grounding: Show field conflicts');
      const picked = await waitFor(
        'the conflicts QuickPick (or the "no field conflicts" notification)',
        async () => {
          const title = (await page.locator('.quick-input-widget .quick-input-title').textContent().catch(() => '')) ?? '';
          if (/field conflicts?/i.test(title)) {
            const items = await page.locator('.quick-input-list .monaco-list-row').allTextContents();
            return { title, items };
          }
          const none = (await toasts(page)).find((t) => /no field conflicts/i.test(t));
          return none ? { title: none, items: [] } : null;
        },
        30000,
      );
      await shot(page, 'conflicts');
      await page.keyboard.press('Escape');
      const n = expectedConflicts?.length;
      const fields = (expectedConflicts ?? []).map((c) => c.field);
      const ok = n === undefined || (n === picked.items.length && fields.every((f) => picked.items.some((i) => i.includes(f))));
      record(
        'commands',
        ok,
        `reindex: "${toast.trim().slice(0, 120)}"; conflicts: "${picked.title}" ${JSON.stringify(picked.items.map((i) => i.slice(0, 60)))}` +
          (n === undefined ? '' : `; CLI lists ${n} (${fields.join(', ')})`),
      );
    } catch (error) {
      record('commands', false, `${error.message}; toasts: ${JSON.stringify(await toasts(page))}`);
      await shot(page, 'commands-failure');
    }

    // --- a settings change restarts the server with the new initializationOptions
    if (USER_DATA === undefined) {
      log('E2E_USER_DATA not set: skipping the settings check');
    } else {
      try {
        // As a person would: the Settings editor, search, tick the checkbox.
        await runCommand(page, 'Preferences: Open User Settings');
        const editor = page.locator('.settings-editor');
        await editor.waitFor({ state: 'visible', timeout: 20000 });
        await page.waitForTimeout(1000);
        await page.keyboard.type('grounding.strict');
        const item = editor.locator('.setting-item-bool', { hasText: /Strict/ }).first();
        await item.waitFor({ state: 'visible', timeout: 20000 });
        await shot(page, 'settings-editor');
        await item.locator('.setting-value-checkbox').click();
        await page.waitForTimeout(500);
        await shot(page, 'settings-strict-on');
        const wanted = 'initializationOptions: {"evidence":null,"encoding":null,"strict":true}';
        await waitFor('the client to restart with strict: true', async () => outputChannelLogs().includes(wanted), 30000);
        // Back to the draft: the restarted server checks it again and reports its status.
        await page.locator(`.tabs-container .tab[aria-label^="${path.basename(draft)}"]`).first().click();
        await page.locator(`.tabs-container .tab.active[aria-label^="${path.basename(draft)}"]`).first().waitFor({ timeout: 10000 });
        const status = await waitFor(
          'the status bar after the restart',
          async () => statusBarItem(page, 'Grounding status:'),
          TIMEOUT,
        );
        record('settings', true, `ticking grounding.strict restarted the server with ${wanted.split(': ')[1]}; status bar: "${status.text}"`);
      } catch (error) {
        record('settings', false, error.message);
      }
      await shot(page, 'after-settings-change');
    }

    // --- a Markdown file that is not a draft: no Grounding item (no "checking" spinner forever)
    const other = 'README.md';
    let otherOpen = false;
    // Each wait starts from the draft, whose status item is visible: going from it to README.md
    // either hides the item (fixed) or turns it into the spinner (never hidden in between).
    const hiddenOn = async (what) => {
      await waitFor(`no Grounding status bar item on ${what}`, async () => (await statusBarItem(page, 'Grounding')) === null, 30000);
    };
    const draftStatus = () => waitFor('the draft\'s status', async () => statusBarItem(page, 'Grounding status:'), 30000);
    try {
      await focusTab(page, path.basename(draft));
      await draftStatus();
      await openFile(page, other);
      otherOpen = true;
      await hiddenOn(`${other} (just opened)`);
      // Switching away and back must not bring the spinner back either.
      await focusTab(page, path.basename(draft));
      const back = await draftStatus();
      await focusTab(page, other);
      await hiddenOn(`${other} (after switching back)`);
      await shot(page, 'no-spinner');
      record('no-spinner', true, `${other} (not a draft) shows no Grounding item, also after switching back; the draft shows "${back.text}" when active`);
    } catch (error) {
      const item = await statusBarItem(page).catch(() => null);
      record('no-spinner', false, `${error.message}; item: ${JSON.stringify(item)}`);
      await shot(page, 'no-spinner-failure');
    }

    // --- "Draft an answer" with no draft active: exactly one new untitled draft
    const question = expected?.question ?? draftText.match(/^question: (.*)$/m)?.[1] ?? '收到货后多久内可以退货？';
    const fields = (draftText.match(/^fields: \[(.*)\]$/m)?.[1] ?? '退货期限').split(',').map((f) => f.trim()).join(', ');
    const untitled = (labels) => labels.filter((l) => /^Untitled-\d+/.test(l));
    const statusToast = (where) => new RegExp(`answer ${where} \\(status: (answered|partial|abstain|conflict), \\d+ claims?`);
    const badGrammar = /\ba (answered|abstain|partial|conflict)\b/;
    if (otherOpen) {
      try {
        await focusTab(page, other);
        const before = untitled(await tabLabels(page));
        await draftAnswer(page, question, fields);
        const toast = await waitFor('the "opened as a new draft" notification', async () =>
          (await toasts(page)).find((t) => statusToast('opened as a new draft').test(t)) ?? null,
        );
        const after = untitled(await tabLabels(page));
        const text = (await visibleLines(page)).join('\n');
        await shot(page, 'answer-new');
        const ok = after.length === before.length + 1 && text.includes('question:') && !badGrammar.test(toast);
        record(
          'answer-new',
          ok,
          `from ${other}: untitled tabs ${before.length} -> ${after.length} (${JSON.stringify(after)}); the new draft ${
            text.includes('question:') ? 'has front matter' : 'lacks front matter'
          }; notification "${toast.trim()}"`,
        );
        await runCommand(page, 'View: Revert and Close Editor');
      } catch (error) {
        record('answer-new', false, `${error.message}; tabs: ${JSON.stringify(await tabLabels(page))}; toasts: ${JSON.stringify(await toasts(page))}`);
        await shot(page, 'answer-new-failure');
      }
    }

    // --- "Draft an answer" in the open draft: inserted into it, no new tab, a grammatical notification
    try {
      await focusTab(page, path.basename(draft));
      const labelsBefore = await tabLabels(page);
      // Definition lines may wrap in the editor (Markdown wraps by default): match their start only.
      const definitions = (lines) =>
        lines.flatMap((l) => {
          const m = /^\[\^([^\]]+)\]: (\S+@\d+:\d+) /.exec(l);
          return m ? [{ label: m[1], id: m[2] }] : [];
        });
      const known = new Set([...cites.map((c) => c.label), ...definitions(await visibleLines(page)).map((c) => c.label)]);
      await draftAnswer(page, question, fields);
      const toast = await waitFor(`the "inserted into ${path.basename(draft)}" notification`, async () =>
        (await toasts(page)).find((t) => statusToast(`inserted into ${path.basename(draft).replace('.', '\\.')}`).test(t)) ?? null,
      );
      await page.locator('.editor-instance .monaco-editor .view-lines').first().click();
      await page.keyboard.press('Control+End');
      const added = await waitFor('a new citation definition at the end of the draft', async () => {
        const fresh = definitions(await visibleLines(page)).filter((c) => !known.has(c.label));
        return fresh.length > 0 ? fresh : null;
      }, 15000);
      const labelsAfter = await tabLabels(page);
      await shot(page, 'answer-draft');
      const newTabs = labelsAfter.filter((l) => !labelsBefore.includes(l));
      // Each inserted definition has its reference in an inserted claim sentence.
      const lines = await visibleLines(page);
      const claimOf = (label) => lines.find((l) => l.includes(`[^${label}]`) && !l.startsWith(`[^${label}]:`));
      const unreferenced = added.filter((c) => claimOf(c.label) === undefined).map((c) => c.label);
      const ok = newTabs.length === 0 && !badGrammar.test(toast) && unreferenced.length === 0;
      record(
        'answer-draft',
        ok,
        `notification "${toast.trim()}"; new tabs: ${JSON.stringify(newTabs)}; inserted ${added
          .map((c) => `"${claimOf(c.label) ?? '(no claim references it)'}" [^${c.label}]: ${c.id}`)
          .join(', ')}`,
      );
    } catch (error) {
      record('answer-draft', false, `${error.message}; tabs: ${JSON.stringify(await tabLabels(page))}; toasts: ${JSON.stringify(await toasts(page))}`);
      await shot(page, 'answer-draft-failure');
    }

    const finalItem = await statusBarItem(page, 'Grounding status:').catch(() => null);
    log(`status bar after the fix: ${finalItem ? `"${finalItem.text}"` : 'none'}`);
  } catch (error) {
    record('harness', false, error.stack ?? String(error));
    await shot(page, 'failure');
  } finally {
    await context.close();
  }

  const failed = results.filter((r) => !r.ok);
  console.log('');
  for (const r of results) {
    console.log(`${r.ok ? 'PASS' : 'FAIL'}  ${r.name.padEnd(11)} ${r.detail}`);
  }
  console.log(`e2e: ${results.length - failed.length} passed, ${failed.length} failed`);
  process.exit(failed.length === 0 ? 0 : 1);
}

await main();
