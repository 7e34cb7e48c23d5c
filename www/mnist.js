// The MNIST demo: a drawing pad, a dtype selector and the class probabilities from weft.
import init, { mnistLoad, mnistPredict, mnistRows } from './pkg/weft.js';

const pad = document.getElementById('pad');
const ink = pad.getContext('2d', { willReadFrequently: true });
const select = document.getElementById('dtype');
const status = document.getElementById('status');
const probsEl = document.getElementById('probs');
const predictionEl = document.getElementById('prediction');
let ready = false;
let testDigits = null; // Uint8Array: N x 784 pixels, then N labels

function clearPad() {
  ink.fillStyle = '#000';
  ink.fillRect(0, 0, pad.width, pad.height);
}

// 28x28 values in [0, 1]: the drawing's bounding box scaled to fit 20x20, then shifted so its
// centre of mass sits at the centre, as the MNIST digits were prepared.
function padToPixels() {
  const { data } = ink.getImageData(0, 0, pad.width, pad.height);
  let [x0, y0, x1, y1] = [pad.width, pad.height, -1, -1];
  for (let y = 0; y < pad.height; y++) {
    for (let x = 0; x < pad.width; x++) {
      if (data[(y * pad.width + x) * 4] > 20) {
        x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
      }
    }
  }
  const pixels = new Float32Array(784);
  if (x1 < 0) return pixels;
  const side = Math.max(x1 - x0 + 1, y1 - y0 + 1);
  const small = document.createElement('canvas');
  small.width = small.height = 20;
  const s = small.getContext('2d', { willReadFrequently: true });
  s.imageSmoothingEnabled = true;
  s.imageSmoothingQuality = 'high';
  const w = (x1 - x0 + 1) * 20 / side;
  const h = (y1 - y0 + 1) * 20 / side;
  s.drawImage(pad, x0, y0, x1 - x0 + 1, y1 - y0 + 1, (20 - w) / 2, (20 - h) / 2, w, h);
  const box = s.getImageData(0, 0, 20, 20).data;
  let [mass, mx, my] = [0, 0, 0];
  for (let i = 0; i < 400; i++) {
    const v = box[i * 4] / 255;
    mass += v; mx += v * (i % 20); my += v * Math.floor(i / 20);
  }
  const dx = Math.round(14 - (mass ? mx / mass : 9.5) - 0.5);
  const dy = Math.round(14 - (mass ? my / mass : 9.5) - 0.5);
  for (let i = 0; i < 400; i++) {
    const x = (i % 20) + dx;
    const y = Math.floor(i / 20) + dy;
    if (x >= 0 && x < 28 && y >= 0 && y < 28) pixels[y * 28 + x] = box[i * 4] / 255;
  }
  return pixels;
}

// Shows 28x28 pixel values (0..1) on the pad, scaled up.
function showPixels(pixels) {
  const cell = pad.width / 28;
  clearPad();
  for (let i = 0; i < 784; i++) {
    const v = Math.round(pixels[i] * 255);
    ink.fillStyle = `rgb(${v},${v},${v})`;
    ink.fillRect((i % 28) * cell, Math.floor(i / 28) * cell, cell, cell);
  }
}

function showProbs(probs) {
  const best = probs.indexOf(Math.max(...probs));
  predictionEl.textContent = String(best);
  predictionEl.dataset.digit = String(best);
  probsEl.replaceChildren();
  probs.forEach((p, d) => {
    const label = document.createElement('span');
    label.textContent = String(d);
    const bar = document.createElement('div');
    bar.className = 'bar';
    bar.style.width = `${(p * 100).toFixed(1)}%`;
    const value = document.createElement('span');
    value.textContent = `${(p * 100).toFixed(2)}%`;
    if (d === best) [label, value].forEach((e) => e.classList.add('top'));
    probsEl.append(label, bar, value);
  });
}

let current = null; // the pixels last predicted
let pending = Promise.resolve();

async function predict(pixels) {
  current = pixels;
  if (!ready) return;
  const run = pending.then(async () => {
    status.textContent = `Running ${select.value}…`;
    const started = performance.now();
    const probs = await mnistPredict(select.value, pixels);
    showProbs(Array.from(probs));
    status.textContent = `${select.value}: ${(performance.now() - started).toFixed(0)} ms`;
    status.dataset.state = 'ok';
  }).catch((e) => {
    status.textContent = `Error: ${e.message ?? e}`;
    status.dataset.state = 'error';
  });
  pending = run;
  return run;
}

let drawing = false;
function point(e) {
  const r = pad.getBoundingClientRect();
  return [(e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height];
}
pad.addEventListener('pointerdown', (e) => {
  drawing = true;
  pad.setPointerCapture(e.pointerId);
  ink.beginPath();
  ink.moveTo(...point(e));
});
pad.addEventListener('pointermove', (e) => {
  if (!drawing) return;
  ink.lineTo(...point(e));
  ink.stroke();
});
pad.addEventListener('pointerup', () => {
  if (!drawing) return;
  drawing = false;
  predict(padToPixels());
});

document.getElementById('clear').addEventListener('click', () => {
  clearPad();
  current = null;
  predictionEl.textContent = '–';
  delete predictionEl.dataset.digit;
  probsEl.replaceChildren();
});

// Shows test digit `i` and predicts it; returns its label.
async function showTestDigit(i) {
  const n = testDigits.length / 785;
  const pixels = Float32Array.from(testDigits.subarray(i * 784, (i + 1) * 784), (b) => b / 255);
  showPixels(pixels);
  await predict(pixels);
  return testDigits[n * 784 + i];
}

document.getElementById('sample').addEventListener('click', () => {
  if (testDigits) showTestDigit(Math.floor(Math.random() * (testDigits.length / 785)));
});
select.addEventListener('change', () => current && predict(current));

async function main() {
  clearPad();
  ink.strokeStyle = '#fff';
  ink.lineWidth = 22;
  ink.lineCap = ink.lineJoin = 'round';
  try {
    await init();
    const [model, digits] = await Promise.all(['mnist/model-f32.safetensors', 'mnist/test-digits.bin'].map(
      async (url) => {
        const r = await fetch(url);
        if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
        return new Uint8Array(await r.arrayBuffer());
      }));
    testDigits = digits;
    await mnistLoad(model, undefined, 0);
    for (const key of mnistRows()) select.add(new Option(key, key, key === 'F32', key === 'F32'));
    select.disabled = false;
    ready = true;
    status.textContent = 'Ready: draw a digit.';
    status.dataset.state = 'ok';
    if (current) await predict(current);
  } catch (e) {
    status.textContent = `Error: ${e.message ?? e}`;
    status.dataset.state = 'error';
  }
}

// For the page's tests: predict a test digit, or given pixels, and wait for the result.
window.mnistDemo = { showTestDigit, predict, padToPixels, ready: main() };
