// Semantic search in the page: the passages are embedded once (all-MiniLM-L6-v2 in weft's
// worker), kept in memory and in IndexedDB, and ranked by cosine similarity to each query's
// embedding. A passage embedded before, by the same model URL, is read back from IndexedDB
// instead of being embedded again (after a reload too).
import * as weft from '/js/index.js';

const MODEL = new URLSearchParams(location.search).get('model') ?? '/models/all-MiniLM-L6-v2';
const SAMPLE = [
  'Mix flour, water, salt and yeast, knead the dough, let it rise, then bake at 230 degrees.',
  'The cheetah can reach speeds of over 100 kilometres per hour in short bursts.',
  'Paris is the capital and most populous city of France.',
  'Backpropagation computes gradients of the loss with respect to every weight.',
  'Keep your bedroom dark and cool, and avoid screens before going to bed.',
  'The Eiffel Tower was completed in 1889 for the World\'s Fair.',
  'A convolutional network applies learned filters across an image.',
  'Regular exercise improves mood and sleep quality.',
];

const $ = (id) => document.getElementById(id);
const state = { model: null, passages: [], vectors: [] };

function showError(e) {
  $('error').hidden = false;
  $('error').innerHTML = '';
  const strong = document.createElement('strong');
  strong.textContent = e.code ?? 'ERROR';
  $('error').append(strong, document.createTextNode(e.message ?? String(e)));
}

function dot(a, b) {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

// IndexedDB: one object store of Float32Arrays keyed by [model URL, passage text]. Storage is
// an optimisation: when IndexedDB is missing or fails (private windows, quota), every passage
// is embedded as before.
const DB = { name: 'weft-search', store: 'embeddings' };

function request(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

let dbPromise = null;
function openDb() {
  if (!dbPromise) {
    const r = indexedDB.open(DB.name, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(DB.store);
    dbPromise = request(r).catch(() => null);
  }
  return dbPromise;
}

async function storedVectors(passages) {
  const db = await openDb().catch(() => null);
  if (!db) return passages.map(() => undefined);
  const store = db.transaction(DB.store).objectStore(DB.store);
  return Promise.all(passages.map((p) => request(store.get([MODEL, p])).catch(() => undefined)));
}

async function storeVectors(passages, vectors) {
  const db = await openDb().catch(() => null);
  if (!db || !passages.length) return;
  const tx = db.transaction(DB.store, 'readwrite');
  passages.forEach((p, i) => tx.objectStore(DB.store).put(vectors[i], [MODEL, p]));
  await new Promise((resolve) => {
    tx.oncomplete = tx.onerror = tx.onabort = resolve;
  });
}

async function forgetStored() {
  const db = await openDb();
  if (!db) return;
  const tx = db.transaction(DB.store, 'readwrite');
  tx.objectStore(DB.store).clear();
  await new Promise((resolve) => {
    tx.oncomplete = tx.onerror = tx.onabort = resolve;
  });
  $('status').textContent = 'Stored passage embeddings removed.';
}

async function embedPassages() {
  const passages = $('passages').value.split('\n').map((l) => l.trim()).filter((l) => l.length);
  if (!passages.length) return;
  $('embed').disabled = $('query').disabled = $('search').disabled = true;
  $('progress').value = 0;
  $('status').textContent = `Embedding ${passages.length} passages…`;
  const start = performance.now();
  try {
    const vectors = await storedVectors(passages);
    const missing = passages.map((_, i) => i).filter((i) => !(vectors[i] instanceof Float32Array));
    const stored = passages.length - missing.length;
    const update = (done) => {
      $('progress').value = (stored + done) / passages.length;
      $('status').textContent = `Embedded ${stored + done} of ${passages.length} passages`;
    };
    update(0);
    if (missing.length) {
      const fresh = await state.model.embed(missing.map((i) => passages[i]), {
        batchSize: 16,
        onProgress: ({ done }) => update(done),
      });
      missing.forEach((i, j) => (vectors[i] = fresh[j]));
      await storeVectors(missing.map((i) => passages[i]), fresh);
    }
    $('progress').value = 1;
    state.passages = passages;
    state.vectors = vectors;
    const s = (performance.now() - start) / 1000;
    const from = stored ? ` (${stored} read from IndexedDB)` : '';
    $('status').textContent = `${passages.length} passages embedded${from} in ${s.toFixed(1)} s; ready to search.`;
    $('query').disabled = $('search').disabled = false;
    $('query').focus();
  } catch (e) {
    showError(e);
  } finally {
    $('embed').disabled = false;
  }
}

async function search(event) {
  event.preventDefault();
  const query = $('query').value.trim();
  if (!query || !state.vectors.length) return;
  const [q] = await state.model.embed([query]);
  // Embeddings are L2-normalised: the dot product is the cosine.
  const ranked = state.vectors.map((v, i) => ({ i, score: dot(q, v) })).sort((a, b) => b.score - a.score);
  $('results').innerHTML = '';
  for (const { i, score } of ranked.slice(0, 10)) {
    const li = document.createElement('li');
    const s = document.createElement('span');
    s.className = 'score';
    s.textContent = score.toFixed(3);
    const text = document.createElement('span');
    text.className = 'passage';
    text.textContent = state.passages[i];
    const bar = document.createElement('div');
    bar.className = 'bar';
    const fill = document.createElement('span');
    fill.style.width = `${Math.max(0, score) * 100}%`;
    bar.append(fill);
    li.append(s, text, bar);
    $('results').append(li);
  }
}

$('passages').value = SAMPLE.join('\n');
$('file').addEventListener('change', async () => {
  const file = $('file').files[0];
  if (file) $('passages').value = await file.text();
});
$('embed').addEventListener('click', embedPassages);
$('forget').addEventListener('click', forgetStored);
$('query-form').addEventListener('submit', search);

try {
  await weft.init();
  state.model = await weft.loadModel(MODEL, {
    task: 'embed',
    onProgress: ({ bytesLoaded, bytesTotal }) => {
      $('progress').value = bytesLoaded / bytesTotal;
      $('status').textContent = `Loading the model: ${(bytesLoaded / 1e6).toFixed(1)} of ${(bytesTotal / 1e6).toFixed(1)} MB`;
    },
  });
  $('status').textContent = `Model loaded (${state.model.dim} dimensions). Embed the passages to search them.`;
  $('progress').value = 0;
  $('embed').disabled = false;
} catch (e) {
  showError(e);
  $('status').textContent = 'The model could not be loaded.';
}
