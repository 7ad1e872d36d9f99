import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  RevealOutputChannelOn,
  State,
  type DocumentSelector,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';
import { registerCommands, SERVER_COMMANDS, type CommandHost } from './commands';
import {
  configurationValue,
  readServerSettings,
  resolveLaunch,
  RESTART_SETTINGS,
  type ServerLaunch,
} from './settings';
import { parseStatus, STATUS_NOTIFICATION, StatusBar } from './status';

const CLIENT_ID = 'grounding';
const CLIENT_NAME = 'Grounding';

export const DOCUMENT_SELECTOR: DocumentSelector = [
  { scheme: 'file', language: 'markdown' },
  { scheme: 'file', pattern: '**/*.answer.json' },
];

function isDraft(document: vscode.TextDocument): boolean {
  if (document.uri.scheme !== 'file') {
    return false;
  }
  return document.languageId === 'markdown' || document.uri.path.endsWith('.answer.json');
}

/** Owns the language client: starts it only in a trusted workspace, restarts it on setting changes. */
class Controller implements CommandHost, vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<void> = Promise.resolve();
  private untrustedNoticeShown = false;
  /** Closes the "not trusted" notification while it is on screen. */
  private closeUntrustedNotice: (() => void) | undefined;
  /** launchKey() of the running client. */
  private startedWith: string | undefined;
  private stopping = false;

  constructor(
    private readonly output: vscode.OutputChannel,
    private readonly status: StatusBar,
  ) {}

  log(message: string): void {
    this.output.appendLine(`[client ${new Date().toISOString()}] ${message}`);
  }

  showOutput(): void {
    this.output.show(true);
  }

  /** A draft-like document (Markdown or *.answer.json on disk) that the server did not call a non-draft. */
  isDraft(document: vscode.TextDocument): boolean {
    return isDraft(document) && !this.status.isNotADraft(document.uri);
  }

  workspaceRoot(): vscode.Uri | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri;
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(task).catch((error: unknown) => {
      this.log(`error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    });
    return this.queue;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.startNow());
  }

  restart(): void {
    void this.enqueue(async () => {
      await this.stopNow();
      await this.startNow();
    });
  }

  /** Restarts only when the launch command or the settings sent to the server changed. */
  restartIfChanged(): void {
    void this.enqueue(async () => {
      if (this.client !== undefined && this.startedWith === launchKey()) {
        this.log('settings changed, but not the server command or its options: no restart');
        return;
      }
      this.log('settings changed: restarting the server');
      await this.stopNow();
      await this.startNow();
    });
  }

  async readyClient(): Promise<LanguageClient | undefined> {
    if (!vscode.workspace.isTrusted) {
      this.tellUntrusted(true);
      return undefined;
    }
    await this.queue;
    if (this.client === undefined || this.client.state !== State.Running) {
      const action = await vscode.window.showErrorMessage(
        'Grounding: the language server is not running.',
        'Restart Server',
        'Show Output',
      );
      if (action === 'Restart Server') {
        this.restart();
      } else if (action === 'Show Output') {
        this.output.show(true);
      }
      return undefined;
    }
    return this.client;
  }

  /**
   * In Restricted Mode the status bar item always says so. The notification itself is shown when
   * it matters: when a draft is (or gets) opened, or a command is run (`force`). At startup VS
   * Code's own trust prompt is usually on screen, and a notification shown behind it would
   * outlive a grant. It is a progress notification, the only kind an extension can close:
   * {@link trustGranted} closes it; its link opens the trust editor, Cancel dismisses it.
   */
  tellUntrusted(force: boolean): void {
    this.status.setMode('untrusted');
    if (this.closeUntrustedNotice !== undefined) {
      return; // already on screen
    }
    const draftOpen = vscode.window.visibleTextEditors.some((e) => isDraft(e.document));
    if (!force && (this.untrustedNoticeShown || !draftOpen)) {
      return;
    }
    this.untrustedNoticeShown = true;
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title:
          'Grounding: this workspace is not trusted, so the Grounding language server was not started and citations are not checked. ' +
          '[Manage Workspace Trust](command:workbench.trust.manage) to start it.',
        cancellable: true,
      },
      (_progress, token) =>
        new Promise<void>((resolve) => {
          this.closeUntrustedNotice = resolve;
          token.onCancellationRequested(() => resolve());
        }).finally(() => {
          this.closeUntrustedNotice = undefined;
        }),
    );
  }

  /** Trust was granted: the "not trusted" notification goes away and the server starts. */
  trustGranted(): Promise<void> {
    this.closeUntrustedNotice?.();
    this.log('workspace trust granted: starting the server');
    return this.start();
  }

  private async startNow(): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      this.log('workspace is not trusted: the language server is not started');
      this.tellUntrusted(false);
      return;
    }
    if (this.client !== undefined) {
      return;
    }
    const folder = vscode.workspace.workspaceFolders?.[0];
    const launch = resolveLaunch(folder);
    const settings = readServerSettings(folder);
    this.startedWith = launchKey();
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      options: {
        cwd: folder?.uri.fsPath,
        env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONIOENCODING: 'utf-8' },
      },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: DOCUMENT_SELECTOR,
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // versionDocuments 'virtual': this client serves grounding-evidence: URIs (EvidenceContentProvider).
      initializationOptions: { ...settings, versionDocuments: 'virtual' },
      workspaceFolder: folder,
      synchronize: {
        fileEvents: vscode.workspace.createFileSystemWatcher('**/*.{md,txt,json,toml}'),
      },
      diagnosticCollectionName: 'grounding',
      middleware: {
        workspace: {
          configuration: (params, token, next) => {
            const items = params.items;
            if (!items.some((item) => item.section === 'grounding' || item.section?.startsWith('grounding.'))) {
              return next(params, token);
            }
            return items.map((item) => {
              const section = item.section ?? '';
              if (section === 'grounding' || section.startsWith('grounding.')) {
                const scope = item.scopeUri === undefined ? folder : vscode.Uri.parse(item.scopeUri);
                return configurationValue(section, readServerSettings(scope));
              }
              return section === '' ? null : (vscode.workspace.getConfiguration().get(section) ?? null);
            });
          },
        },
      },
    };
    this.log(`starting: ${launch.command} ${launch.args.join(' ')} (from ${launch.origin}) in ${folder?.uri.fsPath ?? '(no folder)'}`);
    this.log(`initializationOptions: ${JSON.stringify(settings)}`);
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    keepOwnCommands(client);
    client.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
      const parsed = parseStatus(params);
      if (parsed !== undefined) {
        this.status.update(parsed);
      }
    });
    client.onDidChangeState((event) => {
      if (event.newState === State.Running) {
        this.status.setMode('running');
      } else if (event.newState === State.Stopped && !this.stopping) {
        this.status.setMode('failed', 'It stopped; see the Grounding output.');
      }
    });
    this.client = client;
    this.status.setMode('starting');
    try {
      await client.start();
      this.status.setMode('running');
      this.log('server started');
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.log(`server failed to start: ${message}`);
      this.status.setMode('failed', message);
      this.client = undefined;
      try {
        await client.dispose();
      } catch {
        // The process may never have started.
      }
      void this.reportStartFailure(launch, message);
    }
  }

  private async reportStartFailure(launch: ServerLaunch, message: string): Promise<void> {
    const hint =
      launch.origin === 'PATH'
        ? 'Install Grounding (pip install grounding) or set "grounding.server.path" or "grounding.python".'
        : `Check the "${launch.origin}" setting.`;
    const action = await vscode.window.showErrorMessage(
      `Grounding: could not start "${launch.command} ${launch.args.join(' ')}": ${message}. ${hint}`,
      'Open Settings',
      'Show Output',
    );
    if (action === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'grounding.');
    } else if (action === 'Show Output') {
      this.output.show(true);
    }
  }

  private async stopNow(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.startedWith = undefined;
    if (client === undefined) {
      return;
    }
    this.stopping = true;
    try {
      this.log('stopping server');
      await client.dispose(5000);
    } catch (error) {
      this.log(`error while stopping: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      this.stopping = false;
      this.status.setMode('stopped');
    }
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopNow());
  }

  dispose(): void {
    void this.stop();
  }
}

/** Everything that decides how the server is started, to tell a real change from a spurious one. */
function launchKey(): string {
  const folder = vscode.workspace.workspaceFolders?.[0];
  return JSON.stringify({ launch: resolveLaunch(folder), settings: readServerSettings(folder) });
}

/**
 * The server advertises the same command names the extension contributes. vscode-languageclient
 * would register them a second time (which throws), so it registers only the server's others.
 */
function keepOwnCommands(client: LanguageClient): void {
  const feature = client.getFeature(ExecuteCommandRequest.method);
  const own = new Set<string>(SERVER_COMMANDS);
  const register = feature.register.bind(feature);
  feature.register = (data) => {
    const commands = (data.registerOptions.commands ?? []).filter((c) => !own.has(c));
    register({ ...data, registerOptions: { ...data.registerOptions, commands } });
  };
}

/** Scheme of the read-only documents the server returns for old evidence versions (go to definition). */
export const EVIDENCE_SCHEME = 'grounding-evidence';
const VERSION_TEXT_REQUEST = 'grounding/versionText';

/**
 * Serves `grounding-evidence:/DOC_ID@VERSION` from the server's `grounding/versionText`
 * (read-only), in the language the server names for it (`languageId`: Markdown for `.md`
 * evidence). The URI has no file extension, so VS Code alone would pick Plain Text.
 */
class EvidenceVersionProvider implements vscode.TextDocumentContentProvider {
  /** languageId per URI string, from the server's answers. */
  private readonly languages = new Map<string, string>();

  constructor(private readonly host: CommandHost) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const client = await this.host.readyClient();
    if (client === undefined) {
      return 'The Grounding server is not running, so this evidence version cannot be shown.';
    }
    const result = await client.sendRequest<{ text?: unknown; languageId?: unknown } | null>(VERSION_TEXT_REQUEST, {
      uri: uri.toString(true),
    });
    if (result === null || typeof result.text !== 'string') {
      return `Grounding has no indexed text for ${uri.path.replace(/^\//, '')}.`;
    }
    if (typeof result.languageId === 'string' && result.languageId !== '') {
      this.languages.set(uri.toString(), result.languageId);
    }
    return result.text;
  }

  /** Gives an opened version document its language (default Markdown). Changing it reopens the document. */
  applyLanguage(document: vscode.TextDocument): void {
    if (document.uri.scheme !== EVIDENCE_SCHEME) {
      return;
    }
    const language = this.languages.get(document.uri.toString()) ?? 'markdown';
    if (document.languageId !== language) {
      void vscode.languages.setTextDocumentLanguage(document, language);
    }
  }
}

let controller: Controller | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(CLIENT_NAME);
  const status = new StatusBar(isDraft);
  controller = new Controller(output, status);
  const ctl = controller;
  context.subscriptions.push(output, status, ctl, ...registerCommands(ctl));
  const versions = new EvidenceVersionProvider(ctl);
  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(EVIDENCE_SCHEME, versions),
    vscode.workspace.onDidOpenTextDocument((document) => versions.applyLanguage(document)),
  );
  vscode.workspace.textDocuments.forEach((document) => versions.applyLanguage(document));

  context.subscriptions.push(
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      if (!vscode.workspace.isTrusted && editor !== undefined && isDraft(editor.document)) {
        ctl.tellUntrusted(false);
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      void ctl.trustGranted();
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_SETTINGS.some((s) => event.affectsConfiguration(s))) {
        ctl.restartIfChanged();
      }
    }),
  );
  await ctl.start();
}

export async function deactivate(): Promise<void> {
  if (controller !== undefined) {
    await controller.stop();
    controller = undefined;
  }
}
