import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';

/** Settings that are sent to the server (initializationOptions and workspace/configuration). */
export interface ServerSettings {
  /** Evidence root relative to the workspace root; null = use grounding.toml. */
  evidence: string | null;
  /** tiktoken encoding; null = use grounding.toml. */
  encoding: string | null;
  /** Strict mode; null = use grounding.toml. */
  strict: boolean | null;
}

/** How to start the server. */
export interface ServerLaunch {
  command: string;
  args: string[];
  /** Which setting chose the command, for messages. */
  origin: 'grounding.server.path' | 'grounding.python' | 'PATH';
}

/** Every setting whose change restarts the client. */
export const RESTART_SETTINGS = [
  'grounding.server.path',
  'grounding.python',
  'grounding.evidence',
  'grounding.encoding',
  'grounding.strict',
];

/** The value a user set explicitly in any scope, or undefined when only the default applies. */
function explicit<T>(config: vscode.WorkspaceConfiguration, key: string): T | undefined {
  const inspected = config.inspect<T>(key);
  if (inspected === undefined) {
    return undefined;
  }
  return (
    inspected.workspaceFolderLanguageValue ??
    inspected.workspaceFolderValue ??
    inspected.workspaceLanguageValue ??
    inspected.workspaceValue ??
    inspected.globalLanguageValue ??
    inspected.globalValue
  );
}

function nonEmpty(value: string | undefined): string | null {
  if (value === undefined) {
    return null;
  }
  const trimmed = value.trim();
  return trimmed === '' ? null : trimmed;
}

export function readServerSettings(scope?: vscode.ConfigurationScope): ServerSettings {
  const config = vscode.workspace.getConfiguration('grounding', scope);
  const strict = explicit<boolean>(config, 'strict');
  return {
    evidence: nonEmpty(config.get<string>('evidence')),
    encoding: nonEmpty(config.get<string>('encoding')),
    strict: typeof strict === 'boolean' ? strict : null,
  };
}

/** Expands `${workspaceFolder}`, `${userHome}` and a leading `~`. */
export function expandPath(value: string, folder: vscode.WorkspaceFolder | undefined): string {
  let out = value.trim();
  if (out === '~' || out.startsWith('~/')) {
    out = path.join(os.homedir(), out.slice(1));
  }
  out = out.replace(/\$\{userHome\}/g, os.homedir());
  if (folder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, folder.uri.fsPath);
  }
  return out;
}

export function resolveLaunch(folder: vscode.WorkspaceFolder | undefined): ServerLaunch {
  const config = vscode.workspace.getConfiguration('grounding', folder);
  const serverPath = nonEmpty(config.get<string>('server.path'));
  if (serverPath !== null) {
    return { command: expandPath(serverPath, folder), args: ['lsp'], origin: 'grounding.server.path' };
  }
  const python = nonEmpty(config.get<string>('python'));
  if (python !== null) {
    return {
      command: expandPath(python, folder),
      args: ['-m', 'grounding.cli', 'lsp'],
      origin: 'grounding.python',
    };
  }
  return { command: 'grounding', args: ['lsp'], origin: 'PATH' };
}

/** The value of one `workspace/configuration` item whose section is `grounding` or below it. */
export function configurationValue(section: string, settings: ServerSettings): unknown {
  if (section === 'grounding') {
    return { ...settings };
  }
  const key = section.slice('grounding.'.length);
  if (key === 'evidence' || key === 'encoding' || key === 'strict') {
    return settings[key];
  }
  return vscode.workspace.getConfiguration().get(section) ?? null;
}
