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
// A publisher that imports weir's columnar kernels is built against their
// world, and has them composed in afterwards (`weir plugin build` does).
const kernelsWit = [join(project, 'wit/frames'), join(sdk, '../../../wit/frames')].find(existsSync);

/**
 * `{ bundleLine: "app.ts:line" }` for every line of the bundle that comes from
 * the project's own sources (not the SDK, not node_modules), read from the
 * bundle's source map: its `mappings` are base64 VLQ segments, one group per
 * generated line, each [column, source, line, column, name?] with all but
 * the first relative to the previous segment's.
 */
function authorsLines(map, base) {
  const digits = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const ours = map.sources.map((s) => {
    const file = resolve(base, s);
    const inProject = file.startsWith(project + '/') && !file.includes('/node_modules/') && !file.startsWith(sdk + '/');
    return inProject ? file.slice(project.length + 1) : undefined;
  });
  const lines = {};
  const at = [0, 0, 0, 0]; // source, line, column, name: carried across generated lines
  map.mappings.split(';').forEach((group, generated) => {
    for (const segment of group.split(',')) {
      const fields = [];
      for (let i = 0, value = 0, shift = 0; i < segment.length; i++) {
        const digit = digits.indexOf(segment[i]);
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = shift = 0;
        }
      }
      if (fields.length < 4) continue;
      for (let f = 1; f < fields.length; f++) at[f - 1] += fields[f];
      const file = ours[at[0]];
      if (file && !(generated + 1 in lines)) lines[generated + 1] = `${file}:${at[1] + 1}`;
    }
  });
  return lines;
}

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
    resolve: { alias: { 'weir/frame': join(sdk, 'frame.ts'), weir: join(sdk, 'index.ts') } },
    logLevel: 'warn',
  });
  const source = join(work, 'app.js');
  const { output } = await bundle.generate({ format: 'esm', sourcemap: true, file: source });
  // Where each line of the bundle came from in the author's own files, for
  // the SDK to put in errors' stacks instead of the bundle's line numbers.
  const lines = authorsLines(output[0].map, work);
  await writeFile(source, `${output[0].code}\nglobalThis.__weirLines = ${JSON.stringify(lines)};\n`);
  const kernels = output[0].imports.some((i) => i.startsWith('weir:frames/'));
  // No wasi:http: weir grants no network, and a component that imports it would be refused.
  const { component } = await componentize({
    sourcePath: source,
    witPath: kernels ? kernelsWit : wit,
    worldName: kernels ? 'publisher' : 'stream-publisher',
    disableFeatures: ['http', 'fetch-event'],
  });
  await writeFile(out, component);
  console.log(out);
} catch (e) {
  fail(`building ${entry}: ${e.message ?? e}`);
} finally {
  await rm(work, { recursive: true, force: true });
}
