import init, { capabilities, selfTest } from './pkg/weft.js';

const $ = (id) => document.getElementById(id);

function fill(dl, rows) {
  dl.replaceChildren();
  for (const [k, v, cls] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = v;
    if (cls) dd.className = cls;
    dl.append(dt, dd);
  }
}

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const yes = (b) => (b ? 'yes' : 'no');

function setStatus(text, state) {
  $('status').textContent = text;
  $('status').dataset.state = state;
}

async function runSelfTest() {
  $('rerun').disabled = true;
  const t0 = performance.now();
  const r = await selfTest(7, 67, 129, 45);
  const ms = performance.now() - t0;
  fill($('selftest'), [
    ['shape', `[${r.m}, ${r.k}] · [${r.k}, ${r.n}]`],
    ['max |error|', r.deviation.maxAbs.toExponential(2)],
    ['tolerance', `${r.toleranceAbs.toExponential(1)} + ${r.toleranceRel.toExponential(1)}·|x|`],
    ['time', `${ms.toFixed(1)} ms (first run includes compiling)`],
    ['result', r.passed ? 'PASS' : 'FAIL', r.passed ? 'pass' : 'fail'],
  ]);
  $('rerun').disabled = false;
  return r;
}

async function main() {
  if (!('gpu' in navigator)) {
    setStatus('This browser has no WebGPU. Use a current Chrome, Edge, Firefox or Safari with WebGPU enabled.', 'error');
    return;
  }
  try {
    await init();
    const caps = await capabilities();
    fill($('caps'), [
      ['adapter', caps.adapterName || '(not reported)'],
      ['vendor', caps.vendor || '(not reported)'],
      ['architecture', caps.architecture || '(not reported)'],
      ['kind', caps.isSoftware ? 'software (CPU emulation)' : 'hardware'],
      ['shader-f16', yes(caps.shaderF16)],
      ['subgroups', yes(caps.subgroups)],
      ['timestamp-query', yes(caps.timestampQuery)],
      ['max storage binding', mib(caps.limits.maxStorageBufferBindingSize)],
      ['max buffer', mib(caps.limits.maxBufferSize)],
      ['max workgroups / dim', caps.limits.maxComputeWorkgroupsPerDimension],
      ['max storage buffers / stage', caps.limits.maxStorageBuffersPerShaderStage],
      ['max invocations / workgroup', caps.limits.maxComputeInvocationsPerWorkgroup],
    ]);
    const r = await runSelfTest();
    setStatus(r.passed ? 'WebGPU ready — kernels verified.' : 'Kernel self-test failed.', r.passed ? 'ok' : 'error');
    $('rerun').onclick = () => runSelfTest().catch((e) => setStatus(String(e), 'error'));
  } catch (e) {
    setStatus(`WebGPU failed: ${e?.message ?? e}`, 'error');
  }
}

main();
