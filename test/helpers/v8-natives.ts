import { setFlagsFromString } from 'node:v8';

// V8's own view of an object, for tests of how hot paths build theirs
// (docs/adr/0011-hot-path-object-shapes.md). The flag only lets functions compiled after it use `%` natives.
setFlagsFromString('--allow-natives-syntax');

/** Whether two objects share one hidden class (map). */
export const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

