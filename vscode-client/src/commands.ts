import * as path from 'node:path';
import * as vscode from 'vscode';
import type { LanguageClient, Location, WorkspaceEdit } from 'vscode-languageclient/node';
import { ExecuteCommandRequest } from 'vscode-languageclient/node';

/** Commands that the extension contributes and forwards to the server under the same name. */
export const SERVER_COMMANDS = [
  'grounding.reindex',
  'grounding.showConflicts',
  'grounding.insertCitation',
  'grounding.draftAnswer',
  'grounding.fixAll',
  'grounding.showContext',
  'grounding.rememberMemory',
  'grounding.approveMemory',
  'grounding.forgetMemory',
  'grounding.showReferences',
] as const;

/** One source of a conflicting value, as the server reports it. */
interface ConflictValue {
  value: string;
  doc_id: string;
  version: number;
  line: number;
  path: string;
}

interface Conflict {
  subject: string | null;
  field: string;
  values: ConflictValue[];
}

/** What the commands need from the extension. */
export interface CommandHost {
  /** The running client, or undefined after telling the user why there is none. */
  readyClient(): Promise<LanguageClient | undefined>;
  isDraft(document: vscode.TextDocument): boolean;
  workspaceRoot(): vscode.Uri | undefined;
  log(message: string): void;
  showOutput(): void;
  restart(): void;
}

interface Executed {
  client: LanguageClient;
  result: unknown;
}

async function execute(host: CommandHost, command: string, args: unknown[]): Promise<Executed | undefined> {
  const client = await host.readyClient();
  if (client === undefined) {
    return undefined;
  }
  host.log(`executeCommand ${command} ${JSON.stringify(args)}`);
  try {
    const result: unknown = await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    host.log(`executeCommand ${command} -> ${JSON.stringify(result)}`);
    return { client, result };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    host.log(`executeCommand ${command} failed: ${message}`);
    void vscode.window.showErrorMessage(`Grounding: ${command} failed: ${message}`);
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function looksLikeWorkspaceEdit(value: unknown): boolean {
  return isObject(value) && (isObject(value.changes) || Array.isArray(value.documentChanges));
}

/**
 * Acts on what a server command returned: a WorkspaceEdit (bare or under `edit`) is applied,
 * `{uri}` is opened, and `message` / `failureReason` are shown.
 */
async function handleResult(executed: Executed | undefined): Promise<void> {
  if (executed === undefined || executed.result === undefined || executed.result === null) {
    return;
  }
  const { client, result } = executed;
  const applyEdit = async (raw: unknown): Promise<void> => {
    const edit = await client.protocol2CodeConverter.asWorkspaceEdit(raw as WorkspaceEdit);
    if (!(await vscode.workspace.applyEdit(edit))) {
      void vscode.window.showWarningMessage('Grounding: the edit from the server could not be applied.');
    }
  };
  if (looksLikeWorkspaceEdit(result)) {
    await applyEdit(result);
    return;
  }
  if (typeof result === 'string') {
    if (result.trim() !== '') {
      void vscode.window.showInformationMessage(`Grounding: ${result}`);
    }
    return;
  }
  if (!isObject(result)) {
    return;
  }
  if (looksLikeWorkspaceEdit(result.edit)) {
    await applyEdit(result.edit);
  }
  if (typeof result.uri === 'string') {
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(vscode.Uri.parse(result.uri)));
  }
  if (typeof result.failureReason === 'string') {
    void vscode.window.showWarningMessage(`Grounding: the edit was not applied: ${result.failureReason}`);
  } else if (typeof result.message === 'string' && result.message.trim() !== '') {
    void vscode.window.showInformationMessage(`Grounding: ${result.message}`);
  }
}

/**
 * grounding.draftAnswer's result. With a target draft (`uri` in the arguments) the server has
 * inserted the answer into it (or returned the edit under `edit`, applied here): nothing else is
 * opened. Without one, `markdown` opens as one new untitled Markdown document. The notification
 * names the status as a value ("status: abstain"), the claim count and any missing fields.
 */
/** Reasons for which the server answers a question with no answer to insert (SPEC §13). */
const REFUSED_QUESTIONS = new Set(['unsupported_terms', 'ambiguous_subject', 'no_field']);

async function handleDraftAnswer(host: CommandHost, executed: Executed | undefined, wire: unknown[]): Promise<void> {
  if (executed === undefined || !isObject(executed.result)) {
    await handleResult(executed);
    return;
  }
  const { client, result } = executed;
  const arg = wire[0];
  const target = isObject(arg) && typeof arg.uri === 'string' ? vscode.Uri.parse(arg.uri) : undefined;
  if (typeof result.failureReason === 'string') {
    void vscode.window.showWarningMessage(`Grounding: the answer was not inserted: ${result.failureReason}`);
    return;
  }
  if (typeof result.status !== 'string') {
    await handleResult(executed); // no answer (e.g. the budget leaves no room): the server says why
    return;
  }
  if (typeof result.reason === 'string' && REFUSED_QUESTIONS.has(result.reason) && result.applied !== true) {
    // the closed question grammar refused the question (SPEC §13): nothing was inserted, and
    // the server's own window/showMessage names the unsupported terms or subjects
    host.log(`grounding.draftAnswer: ${result.reason} ${JSON.stringify(result.unsupportedTerms ?? result.subjects)}`);
    return;
  }
  let where: string;
  if (target !== undefined) {
    if (result.applied !== true) {
      if (!looksLikeWorkspaceEdit(result.edit)) {
        void vscode.window.showWarningMessage('Grounding: the server did not insert the answer into the draft.');
        return;
      }
      const edit = await client.protocol2CodeConverter.asWorkspaceEdit(result.edit as WorkspaceEdit);
      if (!(await vscode.workspace.applyEdit(edit))) {
        void vscode.window.showWarningMessage('Grounding: the answer could not be inserted into the draft.');
        return;
      }
    }
    where = `inserted into ${path.posix.basename(target.path)}`;
  } else {
    if (typeof result.markdown !== 'string') {
      await handleResult(executed);
      return;
    }
    const document = await vscode.workspace.openTextDocument({ language: 'markdown', content: result.markdown });
    await vscode.window.showTextDocument(document);
    where = 'opened as a new draft';
  }
  const claims = Array.isArray(result.claims) ? result.claims.length : 0;
  const missing = Array.isArray(result.missingFields) ? result.missingFields.filter((f) => typeof f === 'string') : [];
  const missed = missing.length > 0 ? `; missing: ${missing.join(', ')}` : '';
  void vscode.window.showInformationMessage(
    `Grounding: answer ${where} (status: ${result.status}, ${plural(claims, 'claim')}${missed}).`,
  );
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** "12 documents, 14 versions, 11 active, 1 conflict" from grounding.reindex's summary. */
function reindexSummary(result: unknown): string | undefined {
  if (!isObject(result)) {
    return undefined;
  }
  const parts: string[] = [];
  for (const [key, word] of [
    ['documents', 'document'],
    ['versions', 'version'],
    ['conflicts', 'conflict'],
  ] as const) {
    const n = result[key];
    if (typeof n === 'number') {
      parts.push(plural(n, word));
    }
  }
  if (typeof result.active === 'number') {
    parts.push(`${result.active} active`);
  }
  return parts.length > 0 ? parts.join(', ') : undefined;
}

/** The draft a command acts on: an explicit URI argument, else the active editor's document. */
function targetDocument(host: CommandHost, arg: unknown): vscode.TextDocument | vscode.Uri | undefined {
  if (arg instanceof vscode.Uri) {
    return arg;
  }
  const editor = vscode.window.activeTextEditor;
  if (editor !== undefined && host.isDraft(editor.document)) {
    return editor.document;
  }
  return undefined;
}

function uriOf(target: vscode.TextDocument | vscode.Uri): string {
  return (target instanceof vscode.Uri ? target : target.uri).toString();
}

function noDraft(command: string): void {
  void vscode.window.showWarningMessage(`Grounding: open a Markdown draft or a *.answer.json file to run "${command}".`);
}

/** True when the command was invoked by the server (code action / code lens) with wire arguments. */
function hasWireArgs(args: unknown[]): boolean {
  return args.length > 0 && !(args[0] instanceof vscode.Uri) && args[0] !== undefined;
}

function splitFields(text: string): string[] {
  return text
    .split(/[,，、;；\n]/)
    .map((f) => f.trim())
    .filter((f) => f !== '');
}

function resolveEvidencePath(host: CommandHost, p: string): vscode.Uri | undefined {
  if (p === '') {
    return undefined;
  }
  if (p.startsWith('file:')) {
    return vscode.Uri.parse(p);
  }
  if (path.isAbsolute(p)) {
    return vscode.Uri.file(p);
  }
  const root = host.workspaceRoot();
  return root === undefined ? undefined : vscode.Uri.joinPath(root, ...p.split('/'));
}

function parseConflicts(result: unknown): Conflict[] | undefined {
  const list = isObject(result) && Array.isArray(result.conflicts) ? result.conflicts : result;
  if (!Array.isArray(list)) {
    return undefined;
  }
  const out: Conflict[] = [];
  for (const raw of list) {
    if (!isObject(raw) || typeof raw.field !== 'string' || !Array.isArray(raw.values)) {
      continue;
    }
    const values: ConflictValue[] = [];
    for (const v of raw.values) {
      if (!isObject(v)) {
        continue;
      }
      values.push({
        value: String(v.value ?? ''),
        doc_id: String(v.doc_id ?? ''),
        version: Number(v.version ?? 0),
        line: Number(v.line ?? 0),
        path: String(v.path ?? ''),
      });
    }
    out.push({ subject: typeof raw.subject === 'string' ? raw.subject : null, field: raw.field, values });
  }
  return out;
}

async function showConflicts(host: CommandHost, result: unknown): Promise<void> {
  const conflicts = parseConflicts(result);
  if (conflicts === undefined) {
    if (result !== undefined) {
      host.log(`grounding.showConflicts: unexpected result ${JSON.stringify(result)}`);
    }
    return;
  }
  host.log(`Field conflicts among active sources: ${conflicts.length}`);
  for (const c of conflicts) {
    host.log(`  ${c.subject ?? '(no subject)'} / ${c.field}`);
    for (const v of c.values) {
      host.log(`    "${v.value}"  ${v.doc_id}@${v.version}:${v.line}  ${v.path}:${v.line}`);
    }
  }
  if (conflicts.length === 0) {
    void vscode.window.showInformationMessage('Grounding: no field conflicts among active sources.');
    return;
  }
  type ConflictItem = vscode.QuickPickItem & { conflict: Conflict };
  const items: ConflictItem[] = conflicts.map((c) => ({
    label: `$(error) ${c.field}`,
    description: c.subject ?? '(no subject)',
    detail: c.values.map((v) => `"${v.value}" ${v.doc_id}@${v.version}:${v.line}`).join('  ≠  '),
    conflict: c,
  }));
  const picked = await vscode.window.showQuickPick(items, {
    title: `Grounding: ${conflicts.length} field conflict${conflicts.length === 1 ? '' : 's'}`,
    placeHolder: 'Pick a conflict to see its sources',
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (picked === undefined) {
    return;
  }
  type SourceItem = vscode.QuickPickItem & { source: ConflictValue };
  const sources: SourceItem[] = picked.conflict.values.map((v) => ({
    label: v.value,
    description: `${v.doc_id}@${v.version}:${v.line}`,
    detail: `${v.path}:${v.line}`,
    source: v,
  }));
  const source = await vscode.window.showQuickPick(sources, {
    title: `${picked.conflict.subject ?? '(no subject)'} / ${picked.conflict.field}`,
    placeHolder: 'Open a source line',
  });
  if (source === undefined) {
    return;
  }
  const uri = resolveEvidencePath(host, source.source.path);
  if (uri === undefined) {
    return;
  }
  const line = Math.max(0, source.source.line - 1);
  await vscode.window.showTextDocument(uri, {
    selection: new vscode.Range(line, 0, line, 0),
    preview: true,
  });
}

/**
 * Arguments for a uri-only server command: the caller's own wire arguments when given,
 * else `[{uri}]` of the target draft; undefined (after telling the user) when there is none.
 */
function uriWire(host: CommandHost, args: unknown[], title: string): unknown[] | undefined {
  if (hasWireArgs(args)) {
    return args;
  }
  const target = targetDocument(host, args[0]);
  if (target === undefined) {
    noDraft(title);
    return undefined;
  }
  return [{ uri: uriOf(target) }];
}

interface Question {
  prompt: string;
  placeHolder: string;
  required?: boolean;
}

/** Asks each question in turn; undefined when the user escapes one (nothing is sent). */
async function askAll(questions: Question[], what: string): Promise<string[] | undefined> {
  const answers: string[] = [];
  for (const [i, q] of questions.entries()) {
    const answer = await vscode.window.showInputBox({
      title: `Grounding: ${what} (${i + 1}/${questions.length})`,
      prompt: q.prompt,
      placeHolder: q.placeHolder,
      ignoreFocusOut: true,
      validateInput: (v) => (q.required === true && v.trim() === '' ? 'This cannot be empty' : undefined),
    });
    if (answer === undefined) {
      return undefined;
    }
    answers.push(answer.trim());
  }
  return answers;
}

export function registerCommands(host: CommandHost): vscode.Disposable[] {
  const reg = vscode.commands.registerCommand;
  return [
    reg('grounding.restartServer', () => host.restart()),

    reg('grounding.reindex', async (...args: unknown[]) => {
      const executed = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: 'Grounding: reindexing evidence' },
        () => execute(host, 'grounding.reindex', hasWireArgs(args) ? args : []),
      );
      if (executed === undefined) {
        return;
      }
      const summary = reindexSummary(executed.result);
      if (summary !== undefined && !(isObject(executed.result) && typeof executed.result.message === 'string')) {
        void vscode.window.showInformationMessage(`Grounding: evidence reindexed: ${summary}.`);
      } else {
        await handleResult(executed);
      }
    }),

    reg('grounding.showConflicts', async (...args: unknown[]) => {
      const executed = await execute(host, 'grounding.showConflicts', hasWireArgs(args) ? args : []);
      if (executed !== undefined) {
        await showConflicts(host, executed.result);
      }
    }),

    reg('grounding.insertCitation', async (...args: unknown[]) => {
      let wire: unknown[];
      if (hasWireArgs(args)) {
        wire = args;
      } else {
        const editor = vscode.window.activeTextEditor;
        if (editor === undefined || !host.isDraft(editor.document)) {
          noDraft('Insert citation');
          return;
        }
        const p = editor.selection.active;
        wire = [{ uri: editor.document.uri.toString(), position: { line: p.line, character: p.character } }];
      }
      await handleResult(await execute(host, 'grounding.insertCitation', wire));
    }),

    reg('grounding.draftAnswer', async (...args: unknown[]) => {
      let wire: unknown[];
      if (hasWireArgs(args)) {
        wire = args;
      } else {
        const target = targetDocument(host, args[0]);
        const question = await vscode.window.showInputBox({
          title: 'Grounding: draft an answer (1/2)',
          prompt:
            target === undefined
              ? 'The question to answer'
              : "The question to answer (leave empty to use the draft's question, fields and subject)",
          placeHolder: '活动什么时候开始？',
          ignoreFocusOut: true,
          validateInput: (v) => (v.trim() === '' && target === undefined ? 'Enter a question' : undefined),
        });
        if (question === undefined) {
          return;
        }
        if (question.trim() === '' && target !== undefined) {
          // the server reads the draft's front matter; without fields the question grammar decides
          const draftWire = [{ uri: uriOf(target) }];
          await handleDraftAnswer(host, await execute(host, 'grounding.draftAnswer', draftWire), draftWire);
          return;
        }
        const fieldText = await vscode.window.showInputBox({
          title: 'Grounding: draft an answer (2/2)',
          prompt: 'Required fields, separated by commas (may be empty)',
          placeHolder: '活动时间, 地点',
          ignoreFocusOut: true,
        });
        if (fieldText === undefined) {
          return;
        }
        wire = [
          { uri: target === undefined ? null : uriOf(target), question: question.trim(), fields: splitFields(fieldText) },
        ];
      }
      await handleDraftAnswer(host, await execute(host, 'grounding.draftAnswer', wire), wire);
    }),

    reg('grounding.fixAll', async (...args: unknown[]) => {
      const wire = uriWire(host, args, 'Fix all');
      if (wire === undefined) {
        return;
      }
      await handleResult(await execute(host, 'grounding.fixAll', wire));
    }),

    reg('grounding.rememberMemory', async (...args: unknown[]) => {
      if (hasWireArgs(args)) {
        await handleResult(await execute(host, 'grounding.rememberMemory', args));
        return;
      }
      const answers = await askAll([
        { prompt: 'Memory scope (who or what it is about)', placeHolder: '客户-李华', required: true },
        { prompt: 'Key', placeHolder: '语言', required: true },
        { prompt: 'Value', placeHolder: '中文', required: true },
        { prompt: 'Approved by (leave empty for a proposal that needs approval)', placeHolder: '客服-王芳' },
      ], 'remember a memory entry');
      if (answers === undefined) {
        return;
      }
      const [scope, key, value, approvedBy] = answers;
      const wire = { scope, key, value, ...(approvedBy === '' ? {} : { approvedBy }) };
      // the server asks for confirmation before it writes
      await handleResult(await execute(host, 'grounding.rememberMemory', [wire]));
    }),

    reg('grounding.approveMemory', async (...args: unknown[]) => {
      if (hasWireArgs(args)) {
        await handleResult(await execute(host, 'grounding.approveMemory', args));
        return;
      }
      const answers = await askAll([
        { prompt: 'The entry to approve', placeHolder: 'memory:客户-李华/称呼@1', required: true },
        { prompt: 'Approved by', placeHolder: '客服-王芳', required: true },
      ], 'approve a memory entry');
      if (answers !== undefined) {
        await handleResult(await execute(host, 'grounding.approveMemory', [{ id: answers[0], by: answers[1] }]));
      }
    }),

    reg('grounding.forgetMemory', async (...args: unknown[]) => {
      if (hasWireArgs(args)) {
        await handleResult(await execute(host, 'grounding.forgetMemory', args));
        return;
      }
      const answers = await askAll([
        { prompt: 'The key to forget (every version)', placeHolder: 'memory:客户-李华/称呼', required: true },
        { prompt: 'Reason (kept in the log; may be empty)', placeHolder: '客户要求' },
      ], 'forget a memory key');
      if (answers !== undefined) {
        await handleResult(await execute(host, 'grounding.forgetMemory', [{ id: answers[0], reason: answers[1] }]));
      }
    }),

    // The reference lens on an evidence line ("cited by 3 drafts, 1 stale"): the server
    // answers the citing locations; VS Code shows them in its references peek.
    reg('grounding.showReferences', async (...args: unknown[]) => {
      const [uri, line] = args;
      if (typeof uri !== 'string' || typeof line !== 'number') {
        return;
      }
      const executed = await execute(host, 'grounding.showReferences', [uri, line]);
      if (executed === undefined || !Array.isArray(executed.result)) {
        return;
      }
      const locations = await executed.client.protocol2CodeConverter.asReferences(executed.result as Location[]);
      await vscode.commands.executeCommand(
        'editor.action.showReferences',
        vscode.Uri.parse(uri),
        new vscode.Position(line, 0),
        locations,
      );
    }),

    reg('grounding.showContext', async (...args: unknown[]) => {
      const wire = uriWire(host, args, 'Show draft context');
      if (wire === undefined) {
        return;
      }
      const executed = await execute(host, 'grounding.showContext', wire);
      if (executed === undefined || !isObject(executed.result)) {
        return;
      }
      host.log(`Draft context:\n${JSON.stringify(executed.result, null, 2)}`);
      host.showOutput();
      await handleResult(executed);
    }),
  ];
}
