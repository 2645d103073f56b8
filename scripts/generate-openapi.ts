// `npm run openapi`: writes openapi.yaml from the route schemas (src/openapi/generate.ts).
import { writeFileSync } from 'node:fs';
import { generateOpenapiYaml } from '../src/openapi/generate.js';

writeFileSync(new URL('../openapi.yaml', import.meta.url), await generateOpenapiYaml());
console.log('openapi.yaml written');
