/**
 * `npm start`: reads the configuration, starts the service, prints its base
 * URL and the console's (and, on a first start, the management key), and stops
 * cleanly on SIGINT or SIGTERM.
 */
import { loadConfig } from './config.js';
import { createLogger, type Logger } from './log.js';
import { startService } from './service.js';

// Until the configuration is read (a bad one is logged at this level).
let log: Logger = createLogger('info');

try {
  const config = loadConfig(process.env);
  log = createLogger(config.logLevel);
  const service = await startService(config, log);
  if (service.createdKey !== null) {
    process.stdout.write(`\nCreated the default account. Its management key (shown only this once):\n\n  ${service.createdKey}\n\n`);
  }
  // One write: whoever reads the output at the first line has the console's too.
  const consoleLine = service.consoleUrl === null ? '' : `console on ${service.consoleUrl}\n`;
  process.stdout.write(`agent-vfs listening on ${service.url}\n${consoleLine}`);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: stopping`);
    // A stop that hangs (a database that never answers) must still end the process.
    setTimeout(() => {
      log.error('the stop did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + 120_000).unref();
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error('stop failed', error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
} catch (error) {
  log.error('start failed', error instanceof Error ? error.message : error);
  process.exit(1);
}
