// The totals two JUnit readers of the Node.js world give for one junit.xml, as JSON on stdout:
//   node junit_readers.mjs NODE_MODULES JUNIT_XML
// test-results-parser (codecov, GitHub actions) takes the root's totals when it has them, else sums the suites;
// xunit-viewer counts its test cases by status.
import { createRequire } from 'module'
import { readFileSync } from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const [modules, file] = process.argv.slice(2)
const require = createRequire(path.join(modules, 'x.js'))
const parsed = require('test-results-parser').parse({ type: 'junit', files: [file] })
const parse = (await import(pathToFileURL(path.join(modules, 'xunit-viewer/src/cli/parse.js')))).default
const viewed = await parse(readFileSync(file, 'utf8'))
const statuses = {}
for (const suite of Object.values(viewed.suites)) {
  for (const test of Object.values(suite.tests)) {
    const status = test.status || 'unknown'
    statuses[status] = (statuses[status] || 0) + 1
  }
}
console.log(JSON.stringify({
  'test-results-parser': {
    total: parsed.total, passed: parsed.passed, failed: parsed.failed, errors: parsed.errors, skipped: parsed.skipped
  },
  'xunit-viewer': statuses
}))
