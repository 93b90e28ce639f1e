#!/usr/bin/env node
/**
 * The operators' command line of the service (`agent-vfs`, `npm run cli --`):
 * commander wiring only. The environment is read here, once; each command is
 * a function of its own file that takes a client and an output.
 *
 * Exit status: 0 success, 1 failure (the message on stderr names the cause),
 * 2 usage error (commander's, or a missing URL or key).
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { auditExport } from './audit.js';
import { bench, DEFAULT_SCENARIOS, failedScenarios, SCENARIOS, type ScenarioName } from './bench.js';
import { ApiClient } from './client.js';
import { CliError, EXIT_FAILURE, EXIT_USAGE, usageError } from './errors.js';
import { FILE_STATUSES, type FileStatus, filesList } from './files.js';
import { type Output, stdoutOutput } from './output.js';
import { progressBars } from './progress.js';
import { DEFAULT_CONCURRENCY, formatSummary, push, pushFailed } from './push.js';
import { tokensMint, tokensRevoke } from './tokens.js';
import { runTool, type Tool, TOOLS } from './tools.js';
import { workspacesCreate, workspacesDelete, workspacesList } from './workspaces.js';

// The environment is read here and nowhere else.
const ENV = Object.freeze({ url: process.env.AGENT_VFS_URL, key: process.env.AGENT_VFS_KEY });

/** The options every command takes. */
interface GlobalOptions {
  url?: string;
  key?: string;
  json?: boolean;
  retries: number;
}

/** The client of the command that runs, closed once it is done. */
let running: ApiClient | null = null;

/** What a command runs with: the client, and where its result goes. */
function context(command: Command): { client: ApiClient; out: Output; key: string } {
  const globals = command.optsWithGlobals<GlobalOptions>();
  const url = globals.url ?? ENV.url;
  const key = globals.key ?? ENV.key;
  if (url === undefined || url === '') throw usageError('no service URL: pass --url or set AGENT_VFS_URL');
  if (!/^https?:\/\//.test(url)) throw usageError(`the service URL must start with http:// or https://, got ${JSON.stringify(url)}`);
  if (key === undefined || key === '')
    throw usageError('no key: pass --key or set AGENT_VFS_KEY (a management key svc_sk_…, or a scoped token svc_at_… for the read tools)');
  running = new ApiClient({ baseUrl: url, key, retries: globals.retries });
  return { client: running, out: stdoutOutput(globals.json === true), key };
}

/** A parser for a whole-number option in [min, max]. */
function integer(min: number, max = Number.MAX_SAFE_INTEGER): (raw: string) => number {
  return (raw) => {
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max) {
      throw new InvalidArgumentError(
        max === Number.MAX_SAFE_INTEGER ? `expected a whole number of at least ${min}` : `expected a whole number from ${min} to ${max}`,
      );
    }
    return n;
  };
}

/** Collects repeated `--scenario` options, each once, in the order given. */
function collectScenario(value: string, previous: ScenarioName[] | undefined): ScenarioName[] {
  if (!(SCENARIOS as readonly string[]).includes(value)) throw new InvalidArgumentError(`expected one of ${SCENARIOS.join(', ')}`);
  const name = value as ScenarioName;
  return previous === undefined ? [name] : previous.includes(name) ? previous : [...previous, name];
}

/** Parses `--visibility user:a,group:b` into sorted unique claims; `*` means every token (null). */
function visibilityClaims(raw: string): string[] | null {
  if (raw === '*') return null;
  const claims = raw.split(',').map((c) => c.trim());
  for (const claim of claims) {
    if (!/^(?:user|group):[A-Za-z0-9._@-]{1,128}$/.test(claim))
      throw new InvalidArgumentError(`each claim must be user:<id> or group:<id>, got ${JSON.stringify(claim)}`);
  }
  return [...new Set(claims)].sort();
}

const program = new Command('agent-vfs')
  .description('Command line of the agent-vfs service: workspaces, files, tokens, the audit log, push a directory, and the read tools.')
  .option('--url <url>', 'base URL of the service (env AGENT_VFS_URL)')
  .option('--key <key>', 'management key, or a scoped token for the read tools (env AGENT_VFS_KEY)')
  .option('--json', 'machine-readable output on stdout')
  .option('--retries <n>', 'times one request is sent again after a 429 or 503', integer(0, 100), 6)
  .exitOverride()
  .showSuggestionAfterError();

const workspaces = program.command('workspaces').description('create, list and delete workspaces');
workspaces
  .command('create <name>')
  .description('create a workspace')
  .action(async (name: string, _opts, command: Command) => {
    const { client, out } = context(command);
    await workspacesCreate(client, out, name);
  });
workspaces
  .command('list')
  .description('list the workspaces of the account')
  .action(async (_opts, command: Command) => {
    const { client, out } = context(command);
    await workspacesList(client, out);
  });
workspaces
  .command('delete <name>')
  .description('delete a workspace and all of its files')
  .action(async (name: string, _opts, command: Command) => {
    const { client, out } = context(command);
    await workspacesDelete(client, out, name);
  });

program
  .command('files')
  .description('the files of a workspace')
  .command('list <workspace>')
  .description('list every file with its ingest status (all pages)')
  .addOption(new Option('--status <status>', 'only files with this status').choices(FILE_STATUSES))
  .action(async (workspace: string, opts: { status?: FileStatus }, command: Command) => {
    const { client, out } = context(command);
    await filesList(client, out, workspace, opts.status);
  });

const tokens = program.command('tokens').description('scoped read-only tokens');
tokens
  .command('mint <workspace>')
  .description('mint a read-only token pinned to the workspace (its plaintext is shown once)')
  .option('--claims <claims>', 'comma-separated visibility claims, e.g. user:ann,group:eng (default *)')
  .option('--ttl <seconds>', 'lifetime in seconds, 60-86400 (default 3600)', integer(1))
  .action(async (workspace: string, opts: { claims?: string; ttl?: number }, command: Command) => {
    const { client, out } = context(command);
    await tokensMint(client, out, workspace, opts.claims?.split(','), opts.ttl);
  });
tokens
  .command('revoke <id>')
  .description('revoke a token by its id')
  .action(async (id: string, _opts, command: Command) => {
    const { client, out } = context(command);
    await tokensRevoke(client, out, id);
  });

program
  .command('audit')
  .description('the audit log of reads')
  .command('export <workspace>')
  .description('print the audit events as JSON Lines, oldest first')
  .option('--after <iso>', 'only events after this ISO 8601 date-time, e.g. 2026-11-21T00:00:00Z')
  .option('--follow', 'keep polling for new events until interrupted')
  .option('--interval <seconds>', 'pause between polls with --follow', (raw) => {
    const n = Number(raw);
    if (!(n > 0 && n <= 3600)) throw new InvalidArgumentError('expected a number of seconds above 0, at most 3600');
    return n;
  })
  .action(async (workspace: string, opts: { after?: string; follow?: boolean; interval?: number }, command: Command) => {
    const { client, out } = context(command);
    // Interrupting is how a follow ends: it is a success, not a failure.
    if (opts.follow === true) for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0));
    await auditExport(client, out, workspace, {
      after: opts.after,
      follow: opts.follow === true,
      intervalMs: opts.interval === undefined ? undefined : opts.interval * 1000,
    });
  });

program
  .command('push <dir> <workspace>')
  .description('make the workspace hold the files of a directory: upload new and changed files, wait for ingest, summarize')
  .option('--visibility <claims>', 'visibility claims of every pushed file, e.g. user:ann,group:eng (default: every token)', visibilityClaims)
  .option('--delete', 'delete remote files that are not in the directory')
  .option('--concurrency <n>', 'uploads in flight', integer(1, 256), DEFAULT_CONCURRENCY)
  .option('--retry-errors', 'upload again unchanged files whose ingest ended in error')
  .option('--no-wait', 'do not wait for ingest to finish')
  .action(
    async (
      dir: string,
      workspace: string,
      opts: { visibility?: string[] | null; delete?: boolean; concurrency: number; retryErrors?: boolean; wait: boolean },
      command: Command,
    ) => {
      const { client, out } = context(command);
      const summary = await push(client, {
        dir,
        workspace,
        visibility: opts.visibility ?? null,
        delete: opts.delete === true,
        concurrency: opts.concurrency,
        retryErrors: opts.retryErrors === true,
        wait: opts.wait,
        bars: progressBars(process.stderr, process.stderr.isTTY === true),
      });
      out.line(out.json ? JSON.stringify(summary) : formatSummary(summary));
      if (pushFailed(summary)) process.exitCode = EXIT_FAILURE;
    },
  );

program
  .command('bench')
  .description(
    `load-test the service with autocannon: scenarios ${SCENARIOS.join(', ')} (default: all but upload, which writes into the workspace); ` +
      'the read scenarios run with a scoped token it mints; needs a management key',
  )
  .option('--workspace <name>', 'the workspace to read (default bench with --corpus)')
  .option('--corpus <dir>', 'a directory to push into the workspace first (created if missing)')
  .addOption(new Option('--scenario <name>', `a scenario to run, repeat for several: ${SCENARIOS.join(', ')}`).argParser(collectScenario))
  .option('--connections <n>', 'concurrent connections', integer(1, 10_000), 32)
  .option('--pipelining <n>', 'requests in flight on each connection', integer(1, 1_000), 1)
  .option('--duration <seconds>', 'seconds each scenario runs', integer(1, 86_400), 10)
  .action(
    async (
      opts: { workspace?: string; corpus?: string; scenario?: ScenarioName[]; connections: number; pipelining: number; duration: number },
      command: Command,
    ) => {
      const { client, out, key } = context(command);
      const tty = process.stderr.isTTY === true;
      const report = await bench(client, out, key, {
        workspace: opts.workspace,
        corpus: opts.corpus,
        scenarios: opts.scenario ?? DEFAULT_SCENARIOS,
        connections: opts.connections,
        pipelining: opts.pipelining,
        durationSeconds: opts.duration,
        bars: progressBars(process.stderr, tty),
        progress: tty,
        note: (text) => process.stderr.write(`${text}\n`),
      });
      if (out.json) out.line(JSON.stringify(report, null, 2));
      const lost = failedScenarios(report).map((s) => `${s.name} (${s.non2xx} non-2xx, ${s.errors} errors, ${s.timeouts} timeouts)`);
      if (lost.length > 0) {
        process.stderr.write(`agent-vfs: bench: requests failed: ${lost.join('; ')}\n`);
        process.exitCode = EXIT_FAILURE;
      }
    },
  );

for (const tool of Object.keys(TOOLS) as Tool[]) {
  const spec = TOOLS[tool];
  const arg = spec.arg.required ? `<${spec.arg.name}>` : `[${spec.arg.name}]`;
  const command = program.command(`${tool} <workspace> ${arg}`).description(spec.description);
  const attributes: Array<{ name: string; keys: string[]; kind: string }> = [];
  for (const param of spec.params) {
    const parse = param.kind === 'int' ? integer(0) : undefined;
    const main = new Option(param.flags, param.description);
    if (parse !== undefined) main.argParser(parse);
    command.addOption(main);
    const keys = [main.attributeName()];
    if (param.alias !== undefined) {
      // The query parameter's own spelling (--head_limit) works too, as agents' tool calls write it.
      const alias = new Option(param.alias).hideHelp();
      if (parse !== undefined) alias.argParser(parse);
      command.addOption(alias);
      keys.push(alias.attributeName());
    }
    attributes.push({ name: param.name, keys, kind: param.kind });
  }
  command.action(async (workspace: string, value: string | undefined, opts: Record<string, unknown>, self: Command) => {
    const { client, out } = context(self);
    const query = new URLSearchParams();
    if (value !== undefined) query.set(spec.arg.name, value);
    for (const { name, keys, kind } of attributes) {
      const given = keys.map((k) => opts[k]).find((v) => v !== undefined);
      if (given !== undefined) query.set(name, kind === 'bool' ? 'true' : String(given));
    }
    await runTool(client, out, tool, workspace, query);
  });
}

// A reader that closes the pipe early (`| head`) is not a failure.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

try {
  await program.parseAsync(process.argv);
  (running as ApiClient | null)?.close();
} catch (error) {
  if (error instanceof CommanderError) {
    // Commander has printed its message. Asked-for help and the version are successes; help
    // shown because a command was missing is a usage error like the others.
    const asked = error.code === 'commander.helpDisplayed' || error.code === 'commander.version';
    process.exit(asked ? 0 : EXIT_USAGE);
  }
  if (error instanceof CliError) {
    process.stderr.write(`agent-vfs: ${error.message}\n`);
    process.exit(error.exitCode);
  }
  process.stderr.write(`agent-vfs: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(EXIT_FAILURE);
}
