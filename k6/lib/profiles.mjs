// Node only (k6 reads a profile from its own scenario file): every scenario's profile, read
// from k6/<name>.js the way bench/run/cases.py profiles() reads it, the JSON object after
// `export const profile =`. For the unit tests and the settings generator.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SCENARIO_NAMES } from './settings.js';

const k6dir = join(dirname(fileURLToPath(import.meta.url)), '..');
const PROFILE = /^export const profile = (\{[\s\S]*?\n\});$/m;

export function readProfile(name) {
  const m = PROFILE.exec(readFileSync(join(k6dir, `${name}.js`), 'utf8'));
  if (!m) throw new Error(`k6/${name}.js has no profile (export const profile = {...};)`);
  return JSON.parse(m[1]);
}

export const PROFILES = Object.fromEntries(SCENARIO_NAMES.map((n) => [n, readProfile(n)]));
