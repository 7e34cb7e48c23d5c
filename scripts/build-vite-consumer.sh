#!/usr/bin/env bash
# Packs the npm package, installs the tarball into the Vite app in tests/vite-consumer (as a user
# would: `npm install`, then `import ... from 'weft'`) and builds that app into its dist/.
# Vite is installed once and kept; weft is reinstalled from the fresh tarball on every run.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/pack-npm.sh
cd tests/vite-consumer
rm -rf node_modules/weft dist
npm install --prefer-offline --loglevel=error
node_modules/.bin/vite build --logLevel warn
echo "[vite-consumer] built tests/vite-consumer/dist:"
find dist -type f -printf '  %p %s bytes\n' | sort
