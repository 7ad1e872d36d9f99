import * as vscode from 'vscode';

/** Params of the server's `grounding/status` notification. */
export interface DraftStatus {
  uri: string;
  status: string;
  claims: number;
  validClaims: number;
  conflicts: number;
  outputTokens: number | null;
  reserve: number | null;
  errors: number;
  warnings: number;
  /** Memory claims (SPEC §11) among `claims`, and how many of them are valid. */
  memoryClaims: number;
  validMemoryClaims: number;
}

/** `grounding/status` with `status: null`: the document is open but is not a draft. */
export interface NotADraft {
  uri: string;
  status: null;
}

export const STATUS_NOTIFICATION = 'grounding/status';

const ICONS: Record<string, string> = {
  answered: '$(pass)',
  partial: '$(warning)',
  abstain: '$(circle-slash)',
  conflict: '$(error)',
};

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** Accepts only well-formed params; anything else is ignored rather than shown wrong. */
export function parseStatus(raw: unknown): DraftStatus | NotADraft | undefined {
  if (typeof raw !== 'object' || raw === null) {
    return undefined;
  }
  const p = raw as Record<string, unknown>;
  if (typeof p.uri === 'string' && p.status === null) {
    return { uri: p.uri, status: null };
  }
  if (typeof p.uri !== 'string' || typeof p.status !== 'string') {
    return undefined;
  }
  const num = (key: string): number => (isNumber(p[key]) ? (p[key] as number) : 0);
  const opt = (key: string): number | null => (isNumber(p[key]) ? (p[key] as number) : null);
  return {
    uri: p.uri,
    status: p.status,
    claims: num('claims'),
    validClaims: num('validClaims'),
    conflicts: num('conflicts'),
    outputTokens: opt('outputTokens'),
    reserve: opt('reserve'),
    errors: num('errors'),
    warnings: num('warnings'),
    memoryClaims: num('memoryClaims'),
    validMemoryClaims: num('validMemoryClaims'),
  };
}

/** Normalises a URI string so that the server's and VS Code's spellings compare equal. */
function key(uri: string): string {
  try {
    return vscode.Uri.parse(uri, true).toString();
  } catch {
    return uri;
  }
}

/**
 * The status bar item for the active draft. A Markdown document counts as a draft until the
 * server says otherwise (`status: null`); until its first status it shows "checking".
 */
export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly statuses = new Map<string, DraftStatus>();
  /** Documents the server said are not drafts (kept across server restarts: it says so again on open). */
  private readonly notDrafts = new Set<string>();
  private mode: 'running' | 'untrusted' | 'starting' | 'failed' | 'stopped' = 'stopped';
  private detail = '';
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly isDraft: (document: vscode.TextDocument) => boolean) {
    this.item = vscode.window.createStatusBarItem('grounding.status', vscode.StatusBarAlignment.Left, 100);
    this.item.name = 'Grounding';
    this.disposables.push(
      this.item,
      vscode.window.onDidChangeActiveTextEditor(() => this.render()),
      vscode.workspace.onDidCloseTextDocument((document) => {
        this.statuses.delete(key(document.uri.toString()));
        this.notDrafts.delete(key(document.uri.toString()));
      }),
    );
    this.render();
  }

  setMode(mode: StatusBar['mode'], detail = ''): void {
    this.mode = mode;
    this.detail = detail;
    if (mode !== 'running') {
      this.statuses.clear();
    }
    this.render();
  }

  update(status: DraftStatus | NotADraft): void {
    const k = key(status.uri);
    if (status.status === null) {
      this.statuses.delete(k);
      this.notDrafts.add(k);
    } else {
      this.notDrafts.delete(k);
      this.statuses.set(k, status);
    }
    this.render();
  }

  /** True when the server said this open document is not a draft. */
  isNotADraft(uri: vscode.Uri): boolean {
    return this.notDrafts.has(key(uri.toString()));
  }

  private render(): void {
    const item = this.item;
    item.backgroundColor = undefined;
    item.command = undefined;
    if (this.mode === 'untrusted') {
      item.text = '$(workspace-untrusted) Grounding';
      item.tooltip = 'Grounding: the language server does not run in an untrusted workspace. Click to manage workspace trust.';
      item.command = 'workbench.trust.manage';
      item.accessibilityInformation = { label: 'Grounding: restricted mode, workspace not trusted' };
      item.show();
      return;
    }
    if (this.mode === 'failed') {
      item.text = '$(error) Grounding';
      item.tooltip = `Grounding: the language server is not running. ${this.detail}`.trim();
      item.command = 'grounding.restartServer';
      item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
      item.accessibilityInformation = { label: 'Grounding: server not running' };
      item.show();
      return;
    }
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined || !this.isDraft(editor.document) || this.isNotADraft(editor.document.uri)) {
      item.hide();
      return;
    }
    const status = this.statuses.get(key(editor.document.uri.toString()));
    if (status === undefined || this.mode !== 'running') {
      item.text = '$(sync~spin) Grounding';
      item.tooltip = 'Grounding: checking the draft…';
      item.accessibilityInformation = { label: 'Grounding: checking' };
      item.show();
      return;
    }
    const icon = ICONS[status.status] ?? '$(question)';
    const parts = [`${icon} ${status.status}`, `${status.validClaims}/${status.claims} claims`];
    parts.push(`${status.conflicts} conflict${status.conflicts === 1 ? '' : 's'}`);
    if (status.memoryClaims > 0) {
      parts.push(`${status.validMemoryClaims}/${status.memoryClaims} memory`);
    }
    if (status.outputTokens !== null) {
      parts.push(status.reserve !== null ? `${status.outputTokens}/${status.reserve} tok` : `${status.outputTokens} tok`);
    }
    item.text = parts.join(' · ');
    const over = status.outputTokens !== null && status.reserve !== null && status.outputTokens > status.reserve;
    if (status.status === 'conflict' || over || status.errors > 0) {
      item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
    } else if (status.status !== 'answered' || status.warnings > 0) {
      item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
    }
    const tooltip = new vscode.MarkdownString();
    tooltip.appendMarkdown(`**Grounding** — status \`${status.status}\`\n\n`);
    tooltip.appendMarkdown(`- valid claims: ${status.validClaims} of ${status.claims}\n`);
    tooltip.appendMarkdown(`- conflicts: ${status.conflicts}\n`);
    if (status.memoryClaims > 0) {
      tooltip.appendMarkdown(`- memory claims: ${status.validMemoryClaims} valid of ${status.memoryClaims}\n`);
    }
    const tokens = status.outputTokens === null ? 'n/a' : String(status.outputTokens);
    const reserve = status.reserve === null ? 'none declared' : String(status.reserve);
    tooltip.appendMarkdown(`- output tokens: ${tokens} (reserve: ${reserve})\n`);
    tooltip.appendMarkdown(`- problems: ${status.errors} errors, ${status.warnings} warnings\n\n`);
    tooltip.appendMarkdown('Click to open the Problems panel.');
    item.tooltip = tooltip;
    item.command = 'workbench.actions.view.problems';
    item.accessibilityInformation = {
      label:
        `Grounding status: ${status.status}, ${status.validClaims} of ${status.claims} claims valid, ` +
        `${status.conflicts} conflicts, output tokens ${tokens} of reserve ${reserve}`,
    };
    item.show();
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
