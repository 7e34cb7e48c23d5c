// What a user of the npm package writes: import weft, load a GGUF model, stream a few tokens.
import { loadModel } from 'weft';

const out = document.getElementById('out');
const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';

async function run() {
  const model = await loadModel(MODEL, { maxContext: 64, cache: false });
  const tokens = [];
  let text = '';
  for await (const chunk of model.generate('The capital of France is', { maxTokens: 3 })) {
    tokens.push(chunk.token);
    text += chunk.text;
  }
  const stats = await model.stats();
  await model.dispose();
  return { tokens, text, generatedTokens: stats.generatedTokens, backend: stats.backend, weightBytes: stats.weightBytes };
}

run().then(
  (result) => {
    out.textContent = JSON.stringify(result);
    out.dataset.state = 'done';
  },
  (e) => {
    out.textContent = JSON.stringify({ code: e.code, message: e.message });
    out.dataset.state = 'error';
  },
);
