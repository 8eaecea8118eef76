"""``QuadraticAttention``: one layer's OAL attention as an nn.Module (trainable L), and
``DecodeState``, its constant-size recurrent state for token-by-token decoding."""
import torch
from torch import nn

from . import ops
from .errors import check, translated
from .kernels import HeadKernel, LayerKernels, taylor_lower


class QuadraticAttention(nn.Module):
    """Causal OAL attention of one layer: ``forward(q, k, v)`` with q [B, Hq, T, D],
    k [B, Hkv, T, D], v [B, Hkv, T, Dv] -> y [B, Hq, T, Dv].

    ``groups``: one list of groups (lists of dimension indices, a partition of 0..D-1)
    per query head, or one list used by every head (then ``heads`` is required).
    ``L``: [Hq, Gmax+1, Gmax+1] lower-triangular factors (default: the Taylor kernel
    1 + s + s^2/2). ``L`` is an nn.Parameter; the groups are a buffer.
    """

    def __init__(self, groups, L=None, eps=1e-6, heads=None, chunk=64, dtype=torch.float64):
        super().__init__()
        op = "QuadraticAttention"
        check(len(groups) > 0, op, "groups must not be empty")
        per_head = isinstance(groups[0][0], (list, tuple))
        if not per_head:
            check(heads is not None and heads >= 1, op,
                  "one list of groups for all heads needs heads >= 1")
            groups = [groups] * heads
        if L is None:
            kernels = LayerKernels.from_heads(
                [_head(g, taylor_lower(len(g), eps), eps) for g in groups], dtype)
        else:
            L = torch.as_tensor(L)
            check(L.dim() == 3 and L.shape[0] == len(groups), op,
                  f"L must be [Hq = {len(groups)}, Gmax+1, Gmax+1], got {list(L.shape)}")
            kernels = LayerKernels.from_heads(
                [_head(g, L[h, :len(g) + 1, :len(g) + 1], eps) for h, g in enumerate(groups)],
                L.dtype)
        self._init_from(kernels, chunk)

    @classmethod
    def from_kernels(cls, kernels, chunk=64):
        """From a LayerKernels (e.g. ``oal.load_kernels(path).layer(i)``)."""
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self._init_from(kernels, chunk)
        return self

    def _init_from(self, kernels, chunk):
        check(chunk >= 1, "QuadraticAttention", f"chunk must be >= 1, got {chunk}")
        self.register_buffer("group_of", kernels.group_of.clone())
        self.L = nn.Parameter(kernels.L.detach().clone())
        self.eps = float(kernels.eps)
        self.chunk = int(chunk)

    @property
    def heads(self):
        return self.group_of.shape[0]

    @property
    def dim(self):
        return self.group_of.shape[1]

    def kernels(self):
        """The current kernels as a LayerKernels (L detached)."""
        return LayerKernels(self.group_of, self.L.detach(), self.eps)

    def forward(self, q, k, v):
        y, _ = ops.attention(q, k, v, self.group_of, self.L, self.eps, self.chunk)
        return y

    def prefill(self, q, k, v):
        """Attention of a prompt and the decode state after it: (y, DecodeState)."""
        y, S = ops.attention(q, k, v, self.group_of, self.L, self.eps, self.chunk)
        return y, DecodeState(self, S, q.shape[2])

    def decode_state(self):
        """An empty decode state (sized by its first tokens)."""
        return DecodeState(self)

    def extra_repr(self):
        return f"heads={self.heads}, dim={self.dim}, max_groups={self.L.shape[1] - 1}, " \
               f"eps={self.eps}, chunk={self.chunk}"


def _head(groups, L, eps):
    return HeadKernel([list(g) for g in groups], torch.as_tensor(L), eps)


class DecodeState:
    """The recurrent state of one QuadraticAttention for a batch: a constant-size tensor
    S [B, Hkv, Df, Dv+1] (``tensor``, None before the first tokens) and the count of
    tokens absorbed. ``step`` takes one token, ``extend`` several; both return the
    outputs of the new tokens.

    While autograd records (grad mode on and q, k, v, L or the state requiring grad),
    gradients flow through the state like through any tensor: each call returns a new
    one. Otherwise (inference) ``step`` keeps one C++ decoder between tokens
    (``torch.classes.oal.Decoder``: kernels checked and planned once) and updates its
    state tensor in place; ``tensor.clone()`` keeps a snapshot."""

    def __init__(self, attention, tensor=None, tokens=0):
        self.attention = attention
        self.tensor = tensor
        self.tokens = int(tokens)
        self._decoder = None  # (decoder, the group_of, L, eps it was built for)

    def _ensure(self, q, k, v, op):
        if self.tensor is None:
            check(k.dim() >= 3 and v.dim() >= 3, op,
                  f"expected k [B, Hkv, ..., D] and v [B, Hkv, ..., Dv], got {list(k.shape)} "
                  f"and {list(v.shape)}")
            dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
            self.tensor = ops.empty_state(k.shape[0], k.shape[1], k.shape[-1], v.shape[-1],
                                          dtype, q.device)

    @translated
    def step(self, q, k, v):
        """q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv] -> y [B, Hq, Dv]."""
        self._ensure(q, k, v, "DecodeState.step")
        a = self.attention
        if _records_grad(q, k, v, a.L, self.tensor):
            self._decoder = None
            y, self.tensor = ops.step(q, k, v, a.group_of, a.L, a.eps, self.tensor)
        else:
            y = self._persistent_decoder().step(q, k, v)
            self.tensor = self._decoder[0].state()
        self.tokens += 1
        return y

    def extend(self, q, k, v):
        """T new tokens: q [B, Hq, T, D] ... -> y [B, Hq, T, Dv]."""
        self._ensure(q, k, v, "DecodeState.extend")
        a = self.attention
        self._decoder = None  # the functional op returns a new state tensor
        y, self.tensor = ops.attention(q, k, v, a.group_of, a.L, a.eps, a.chunk, self.tensor)
        self.tokens += q.shape[2]
        return y

    def _persistent_decoder(self):
        """The decoder for this state and the attention's current kernels; a new one when
        the attention's group_of, L or eps were replaced, or ``tensor`` was (in-place
        edits of L are seen by the decoder itself: its plan follows L's version)."""
        a = self.attention
        key = (a.group_of, a.L, a.eps)
        if (self._decoder is None or any(x is not y for x, y in zip(key, self._decoder[1]))
                or self._decoder[0].state().data_ptr() != self.tensor.data_ptr()):
            decoder = torch.classes.oal.Decoder(a.group_of, a.L, float(a.eps), self.tensor)
            self._decoder = (decoder, key)
        return self._decoder[0]

    @property
    def state_bytes(self):
        t = self.tensor
        return 0 if t is None else t.numel() * t.element_size()


def _records_grad(*tensors):
    """Whether autograd records through any of ``tensors`` (None allowed)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
