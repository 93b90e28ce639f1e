/**
 * Compiles engine/line-printer.wat (WebAssembly text) with wabt and rewrites the bytes that
 * engine/line-printer.ts holds (`LINE_PRINTER_WASM`, base64) when they differ.
 *
 *   node --import tsx scripts/line-printer-wasm.ts
 *
 * test/line-printer.test.ts compiles the same way and fails when the held bytes are not the
 * source's: run this after changing the .wat.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import initWabt from 'wabt';
import { ROOT } from '../service/script-args.js';

const SOURCE = join(ROOT, 'engine/line-printer.wat');
const HOLDER = join(ROOT, 'engine/line-printer.ts');
const CONSTANT = /(const LINE_PRINTER_WASM =\s*)'([A-Za-z0-9+/=]*)'/;

/** The module's bytes, compiled from engine/line-printer.wat. */
export async function compileLinePrinter(): Promise<Uint8Array> {
  const wabt = await initWabt();
  const module = wabt.parseWat('line-printer.wat', readFileSync(SOURCE, 'utf8'), { bulk_memory: true });
  try {
    module.validate();
    return module.toBinary({}).buffer;
  } finally {
    module.destroy();
  }
}

/** The module's bytes as engine/line-printer.ts holds them (base64). */
export function heldLinePrinter(): string {
  const m = CONSTANT.exec(readFileSync(HOLDER, 'utf8'));
  if (m === null) throw new Error(`${HOLDER} holds no LINE_PRINTER_WASM constant`);
  return m[2];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const base64 = Buffer.from(await compileLinePrinter()).toString('base64');
  if (heldLinePrinter() === base64) console.log('engine/line-printer.ts already holds the compiled module');
  else {
    writeFileSync(HOLDER, readFileSync(HOLDER, 'utf8').replace(CONSTANT, `$1'${base64}'`));
    console.log(`engine/line-printer.ts: LINE_PRINTER_WASM rewritten (${base64.length} base64 characters)`);
  }
}
