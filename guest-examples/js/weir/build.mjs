// Builds a weir publisher written in TypeScript or JavaScript into a component:
// bundles `app.ts` (or `app.js`) with the SDK and apache-arrow, type-checks
// TypeScript, and componentizes the bundle with componentize-js (SpiderMonkey).
//
//     node weir/build.mjs [PROJECT_DIR] [OUT.wasm]
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = dirname(fileURLToPath(import.meta.url));
const project = resolve(process.argv[2] ?? '.');
const entry = ['app.ts', 'app.js'].map((f) => join(project, f)).find(existsSync);
if (!entry) fail(`${project} has no app.ts or app.js`);
const out = resolve(process.argv[3] ?? join(project, `${basename(project).replaceAll('-', '_')}.wasm`));
// The project's own WIT when it carries one, else this repository's.
const wit = [join(project, 'wit'), join(sdk, '../../../wit')].find(existsSync);

function fail(message) {
  console.error(`error: ${message}`);
  process.exit(1);
}

async function load(name) {
  try {
    return await import(name);
  } catch (e) {
    fail(`cannot load ${name} (${e.code ?? e.message}): run \`npm install\` in ${project}`);
  }
}

if (entry.endsWith('.ts')) {
  const ts = (await load('typescript')).default;
  const config = ts.findConfigFile(project, ts.sys.fileExists, 'tsconfig.json');
  const parsed = config
    ? ts.parseJsonConfigFileContent(ts.readConfigFile(config, ts.sys.readFile).config, ts.sys, dirname(config))
    : { options: {}, fileNames: [entry] };
  const program = ts.createProgram(parsed.fileNames, { ...parsed.options, noEmit: true });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length > 0) {
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => project, getNewLine: () => '\n' };
    fail(`TypeScript found errors:\n${ts.formatDiagnostics(diagnostics, host)}`);
  }
}

const { rolldown } = await load('rolldown');
const { componentize } = await load('@bytecodealliance/componentize-js');
const work = await mkdtemp(join(tmpdir(), 'weir-js-'));
try {
  const bundle = await rolldown({
    input: entry,
    external: [/^weir:/, /^wasi:/],
    platform: 'browser',
    resolve: { alias: { weir: join(sdk, 'index.ts') } },
    logLevel: 'warn',
  });
  const { output } = await bundle.generate({ format: 'esm' });
  const source = join(work, 'app.js');
  await writeFile(source, output[0].code);
  // No wasi:http: weir grants no network, and a component that imports it would be refused.
  const { component } = await componentize({
    sourcePath: source,
    witPath: wit,
    worldName: 'stream-publisher',
    disableFeatures: ['http', 'fetch-event'],
  });
  await writeFile(out, component);
  console.log(out);
} catch (e) {
  fail(`building ${entry}: ${e.message ?? e}`);
} finally {
  await rm(work, { recursive: true, force: true });
}
