#!/usr/bin/env bash
# Prints the rows of docs/QUALITY.md, one a line, most informative first (run.sh measures them in
# this order and skips rows already measured, so a partial run is still a useful table).
set -euo pipefail
w() { echo "weft:q$1_g$2_$3:--bits $1 --group $2 --scheme $3 --no-default-keep"; }
echo base
w 4 32 asym; w 2 32 asym
for t in Q4_K_M Q2_K Q8_0 Q3_K_M Q5_K_M Q4_0; do echo "llama:$t"; done
w 8 32 asym; w 3 32 asym
echo "weft:mixed_84mb_g32_asym:--bits 4 --group 32 --scheme asym --no-default-keep --budget-mb 84"
echo "weft:q4_g32_asym+embd8:--bits 4 --group 32 --scheme asym --keep token_embd=8"
echo "weft:q4_g32_asym+v8:--bits 4 --group 32 --scheme asym --keep attn_v=8"
for g in 128 64; do for b in 4 3 2 8; do w $b $g asym; done; done
for g in 32 128 64; do for b in 4 3 2 8; do w $b $g sym; done; done
# Calibrated low-bit rows (run.sh exports CAL, the calibration file) and budget plans, which
# decide every matrix (no default keep rules under a budget).
c() { echo "weft:q$1_g$2_$3_cal${5:-}:--bits $1 --group $2 --scheme $3 --no-default-keep --calibration ${CAL:?} $4"; }
c 3 32 asym ""; c 3 32 asym --compensate _comp; c 2 32 asym ""; c 2 64 sym ""; c 3 64 sym ""
echo "weft:mixed_85mb:--bits 4 --group 32 --scheme asym --budget-mb 85"
for mb in 45 50 52 55 60 65 69 75 80 85 90; do
  echo "weft:mixed_${mb}mb_cal:--bits 4 --group 32 --scheme asym --budget-mb $mb --calibration $CAL"
done
# llama.cpp's own tools with an importance matrix from the same calibration text.
for t in Q2_K Q2_K_S Q3_K_S Q3_K_M Q4_K_S IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M IQ4_XS; do
  echo "imatrix:$t"
done
# GPTQ on the calibration's Hessians.
c 3 32 asym --gptq _gptq; c 2 32 asym --gptq _gptq; c 3 64 sym --gptq _gptq; c 2 64 sym --gptq _gptq
# Chosen mixes at the two sizes (≤ 4.2 and ≤ 3.2 bits/weight): 3-bit layers with the
# embedding at 4 bits and the least sensitive roles (q, k, attention output) at q3_g64_sym; 2-bit
# layers with the embedding at q3_g64_sym.
echo "weft:mix3_gptq:--bits 3 --group 32 --scheme asym --calibration $CAL --gptq --keep token_embd=q4_g32_asym --keep attn_q=q3_g64_sym --keep attn_k=q3_g64_sym --keep attn_output=q3_g64_sym"
echo "weft:mix2_gptq:--bits 2 --group 32 --scheme asym --calibration $CAL --gptq --keep token_embd=q3_g64_sym"
for role in token_embd attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down; do
  echo "role:$role:q2_g32_asym"
done
# The k formats (8-bit scale and zero-point codes per group of 32), calibrated, and budget plans
# at the two sizes (≤ 4.2 and ≤ 3.2 bits/weight: 70.6 and 53.8 MB files) whose
# candidates include them.
k() { echo "weft:q$1_g32_k_cal:--bits $1 --group 32 --scheme k --no-default-keep --calibration $CAL"; }
k 4; k 3; k 2
echo "weft:mixed_k_69mb_cal:--bits 4 --group 32 --scheme asym --budget-mb 69.1 --calibration $CAL"
echo "weft:mixed_k_52mb_cal:--bits 4 --group 32 --scheme asym --budget-mb 52.3 --calibration $CAL"
# Hand mixes against the 69.1 MB plan: q, k, attention output and gate at q3_g32_k (and six
# ffn_up), the rest q4_g32_k.
m3="--bits 4 --group 32 --scheme k --no-default-keep --calibration $CAL --keep attn_q=q3_g32_k --keep attn_k=q3_g32_k --keep attn_output=q3_g32_k --keep ffn_gate=q3_g32_k"
echo "weft:mix3_k_qkog_cal:$m3 --keep blk.2.ffn_up=q3_g32_k"
echo "weft:mix3_k_qkog6u_cal:$m3$(for l in 10 11 12 13 14 15; do printf ' --keep blk.%s.ffn_up=q3_g32_k' $l; done)"
# Tuned by distillation (tune.py; run.sh passes the calibration text and 48 sequences sampled from
# the source): the two plans above with their group parameters and norms tuned, the 52.3 MB
# plan's levels too, and that file tuned further, an epoch at a time, each on 48 more sampled
# sequences.
echo "tuned:mix3_k_qkog6u_cal_g:mix3_k_qkog6u_cal:--epochs 3 --threads 1"
echo "tuned:mixed_k_52mb_cal_gl:mixed_k_52mb_cal:--epochs 3 --levels --threads 1"
echo "tuned:mixed_k_52mb_cal_gl2:mixed_k_52mb_cal_gl:--epochs 1 --levels --level-lr 0.01 --threads 1 --ids ${WORK:?}/gen2-ids.json"
echo "tuned:mixed_k_52mb_cal_gl3:mixed_k_52mb_cal_gl2:--epochs 1 --levels --level-lr 0.01 --threads 1 --ids ${WORK:?}/gen2-ids.json --ids ${WORK:?}/gen3-ids.json"
echo "tuned:mixed_k_52mb_cal_gl4:mixed_k_52mb_cal_gl3:--epochs 1 --levels --level-lr 0.01 --threads 2 --ids ${WORK:?}/gen2-ids.json --ids ${WORK:?}/gen3-ids.json --ids ${WORK:?}/gen4-ids.json"
# Entropy-coded k files (--entropy: rANS over the levels and codes, docs/FORMAT.md): the k rows'
# weights in smaller files, and mixes at the two sizes (<= 4.2 and <= 3.2 bits/weight):
# 4-bit with some roles at 3 bits; 3-bit with q and k at 2 bits, that mix also tuned (its packed
# twin, as tune.py reads and writes packed levels) and then entropy-coded.
e4="--bits 4 --group 32 --scheme k --no-default-keep --calibration $CAL --entropy"
e3="--bits 3 --group 32 --scheme k --no-default-keep --calibration $CAL --entropy"
echo "weft:q4_k_e_cal:$e4"
echo "weft:mix_q3k3_e:$e4 --keep attn_q=q3_g32_k --keep attn_k=q3_g32_k"
echo "weft:mix_g3_e:$e4 --keep ffn_gate=q3_g32_k"
echo "weft:mix_k3_e:$e4 --keep attn_k=q3_g32_k"
echo "weft:q3_k_e_cal:$e3"
echo "weft:mix2_qk2_e:$e3 --keep attn_q=q2_g32_k --keep attn_k=q2_g32_k"
echo "weft:mix2_k2_e:$e3 --keep attn_k=q2_g32_k"
echo "weft:q2_k_e_cal:--bits 2 --group 32 --scheme k --no-default-keep --calibration $CAL --entropy"
echo "weft:mix2_qk2:${e3% --entropy} --keep attn_q=q2_g32_k --keep attn_k=q2_g32_k"
echo "tuned:mix2_qk2_gl:mix2_qk2:--epochs 3 --levels --threads 1"
echo "packed:mix2_qk2_gl_e:mix2_qk2_gl"
