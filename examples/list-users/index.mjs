// Gatehouse quickstart: list the users of your app, search them and block one (docs/quickstart/list-users.md).
// Node 22+, no dependencies.
//
//   GATEHOUSE_URL=http://localhost:3000 DEVELOPER_KEY=dk_… APP_ID=app_… node examples/list-users/index.mjs [search]

const base = process.env.GATEHOUSE_URL ?? 'http://localhost:3000';
const key = process.env.DEVELOPER_KEY;
const appId = process.env.APP_ID;
if (!key || !appId) throw new Error('set DEVELOPER_KEY and APP_ID');

/** One call to the developer API; a refusal becomes an Error naming its catalogue code. */
async function dev(method, path, body) {
  const response = await fetch(new URL(`/v1/dev/apps/${appId}${path}`, base), {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${json.code}: ${json.message}`);
  return json;
}

// Every user of the app, 100 a page, newest first.
let everyone = [];
for (let page = 1; ; page++) {
  const { items, total } = await dev('GET', `/users?page=${page}&pageSize=100`);
  everyone = everyone.concat(items);
  if (everyone.length >= total || items.length === 0) break;
}
console.log(`${everyone.length} users`);

// A search: `q` matches part of the email or the name; `status` narrows to active, blocked or disabled.
const search = process.argv[2] ?? 'example.com';
const found = await dev('GET', `/users?q=${encodeURIComponent(search)}&status=active`);
console.log(`${found.total} active users match "${search}"`);

// Block the first match at this app: their sign-ins to it end, and new ones are refused. Undo with "active".
const target = found.items[0];
if (target) {
  const blocked = await dev('PATCH', `/users/${target.id}`, { status: 'blocked' });
  console.log(`${blocked.email} is now ${blocked.status}`);
}
