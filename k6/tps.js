// tps: see PROFILES.tps in lib/settings.js for what it measures; settings are read there too.
import { scenario } from './lib/scenario.js';

const s = scenario('tps');
export const options = s.options;
export const setup = s.setup;
export const teardown = s.teardown;
export default s.iteration;
export const handleSummary = s.handleSummary;
