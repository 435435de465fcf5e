#!/usr/bin/python3
"""An independent numpy reference of llama2.c's forward pass and greedy loop.

Usage: llama2_ref.py CHECKPOINT STEPS
Prints the greedy token ids that run.c would generate from BOS with
`-t 0 -n STEPS`: run.c runs `steps` forward passes, each sampling a token,
and stops early if it samples BOS (1). Written from the checkpoint format and
run.c's math (rmsnorm eps 1e-5, RoPE on (i, i+1) pairs, GQA head h -> kv head
h / (n_heads / n_kv_heads)); float32 throughout. Slow but obviously correct:
the engine's tests compare both backends against it.
"""
import struct
import sys

import numpy as np

F = np.float32


def load(path):
    raw = open(path, 'rb').read()
    dim, hid, layers, nh, nkv, vocab, seq = struct.unpack('7i', raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    w = np.frombuffer(raw, dtype=F, offset=28)
    hs = dim // nh
    kvd = dim * nkv // nh
    off = 0

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        a = w[off:off + n].reshape(shape)
        off += n
        return a

    m = dict(dim=dim, hid=hid, L=layers, nh=nh, nkv=nkv, vocab=vocab, seq=seq, hs=hs, kvd=kvd)
    m['emb'] = take(vocab, dim)
    m['rms_att'] = take(layers, dim)
    m['wq'] = take(layers, dim, dim)
    m['wk'] = take(layers, kvd, dim)
    m['wv'] = take(layers, kvd, dim)
    m['wo'] = take(layers, dim, dim)
    m['rms_ffn'] = take(layers, dim)
    m['w1'] = take(layers, hid, dim)
    m['w2'] = take(layers, dim, hid)
    m['w3'] = take(layers, hid, dim)
    m['rms_final'] = take(dim)
    off += seq * hs  # freq_cis_real and freq_cis_imag, seq * hs/2 each
    m['wcls'] = m['emb'] if shared else take(vocab, dim)
    return m


def rmsnorm(x, weight):
    ss = F(np.sum(x.astype(np.float64) ** 2) / len(x)) + F(1e-5)
    return weight * (x * F(1.0 / np.sqrt(ss)))


def rope(vec, pos, hs, upto):
    for i in range(0, upto, 2):
        freq = F(1.0) / np.power(F(10000.0), F(i % hs) / F(hs))
        val = F(pos) * freq
        c, s = np.cos(val), np.sin(val)
        v0, v1 = vec[i], vec[i + 1]
        vec[i] = v0 * c - v1 * s
        vec[i + 1] = v0 * s + v1 * c


def forward(m, kc, vc, tok, pos):
    hs, kvd, nh = m['hs'], m['kvd'], m['nh']
    kv_mul = nh // m['nkv']
    x = m['emb'][tok].copy()
    for l in range(m['L']):
        xb = rmsnorm(x, m['rms_att'][l])
        q, k, v = m['wq'][l] @ xb, m['wk'][l] @ xb, m['wv'][l] @ xb
        rope(q, pos, hs, m['dim'])
        rope(k, pos, hs, kvd)
        kc[l, pos], vc[l, pos] = k, v
        att_out = np.zeros(m['dim'], F)
        for h in range(nh):
            kvh = slice((h // kv_mul) * hs, (h // kv_mul + 1) * hs)
            scores = (kc[l, :pos + 1, kvh] @ q[h * hs:(h + 1) * hs]) / np.sqrt(F(hs))
            scores = np.exp(scores - scores.max())
            scores /= scores.sum()
            att_out[h * hs:(h + 1) * hs] = scores @ vc[l, :pos + 1, kvh]
        x = x + m['wo'][l] @ att_out
        xb = rmsnorm(x, m['rms_ffn'][l])
        hb, hb2 = m['w1'][l] @ xb, m['w3'][l] @ xb
        x = x + m['w2'][l] @ (hb * (F(1) / (F(1) + np.exp(-hb))) * hb2)
    return m['wcls'] @ rmsnorm(x, m['rms_final'])


def main():
    m = load(sys.argv[1])
    steps = int(sys.argv[2])
    if steps <= 0 or steps > m['seq']:
        steps = m['seq']
    kc = np.zeros((m['L'], m['seq'], m['kvd']), F)
    vc = np.zeros_like(kc)
    tok, out = 1, []
    for pos in range(steps):
        nxt = int(np.argmax(forward(m, kc, vc, tok, pos)))
        if nxt == 1:
            break
        out.append(nxt)
        tok = nxt
    print(' '.join(map(str, out)))


if __name__ == '__main__':
    main()
