#!/usr/bin/env python3
"""psflow's seed models in PyTorch, for bench_model_throughput --pytorch=THIS (GPU or CPU).

The models of worker/models/model_zoo.cc with the same layers, shapes, initialisers, batch
sizes, optimizers, learning rates, weight decay and gradient clipping, trained on synthetic data
of the same shapes (random pixels in [0, 1), random token ids and labels), fp32. Prints one JSON
line per model on stdout, e.g.

  {"model": "ptb_lstm:small", "examples_per_sec": 1234.5, "words_per_sec": 24690.1, ...}

examples_per_sec counts sequences for the PTB models; words_per_sec is examples x time steps
(equal to examples_per_sec for the classifiers, as psflow counts them).

What each step does, as a PyTorch user would write it: copy the batch from pinned host memory
(non_blocking), zero the gradients, forward, loss, backward, clip (PTB), optimizer step on the
GPU. No synchronisation inside the timed loop (psflow synchronises every step, so this is
PyTorch's best case); torch.cuda.synchronize() before and after it. cudnn.benchmark is on (the
shapes never change; psflow also picks its cuDNN algorithms per shape). TF32 is off for matrix
products, convolutions and RNNs unless --tf32.

--cpu runs the same steps on the CPU with torch.set_num_threads(--threads); the caller also sets
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (Debian's PyTorch does its matrix products in OpenBLAS,
whose own pool torch.set_num_threads does not size).

  python3 bench/torch_models.py --models=mnist_cnn,cifar10_cnn,ptb_lstm:small \\
      [--seconds=10] [--repeats=1] [--gpu=0] [--tf32] [--channels-last] [--cpu [--threads=N]]
"""
import argparse
import contextlib
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ptb_word_lm.py's configurations, as model_zoo.cc's PtbConfigs().
PTB_CONFIGS = {
    #         init_scale, learning_rate, max_grad_norm, num_layers, num_steps, hidden_size,
    #         keep_prob, batch_size, vocab_size
    "small": (0.1, 1.0, 5.0, 2, 20, 200, 1.0, 20, 10000),
    "medium": (0.05, 1.0, 5.0, 2, 35, 650, 0.5, 20, 10000),
    "large": (0.04, 1.0, 10.0, 2, 35, 1500, 0.35, 20, 10000),
    "test": (0.1, 1.0, 1.0, 1, 2, 2, 1.0, 20, 10000),
}
CLASSIFIERS = ("mnist_mlp", "mnist_cnn", "cifar10_cnn")
HOST_BATCHES = 8  # distinct synthetic batches, cycled


def truncated_normal_(tensor, std):
    """tf.truncated_normal_initializer: normal(0, std) redrawn outside two deviations."""
    return nn.init.trunc_normal_(tensor, std=std, a=-2 * std, b=2 * std)


def init_layer(layer, kernel_std, bias_value):
    truncated_normal_(layer.weight, kernel_std)
    nn.init.constant_(layer.bias, bias_value)
    return layer


class MnistMlp(nn.Module):
    """784-100-10, sigmoid hidden layer; Glorot-uniform kernels, zero biases."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 100)
        self.out = nn.Linear(100, 10)
        for layer in (self.hidden, self.out):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        return self.out(torch.sigmoid(self.hidden(x)))


class MnistCnn(nn.Module):
    """Deep MNIST: conv 5x5x32 SAME + ReLU, max-pool 2x2, conv 5x5x64 SAME + ReLU, max-pool 2x2,
    dense 1024 + ReLU, dense 10; kernels truncated normal 0.1, biases 0.1."""

    def __init__(self):
        super().__init__()
        self.conv1 = init_layer(nn.Conv2d(1, 32, 5, padding=2), 0.1, 0.1)
        self.conv2 = init_layer(nn.Conv2d(32, 64, 5, padding=2), 0.1, 0.1)
        self.fc1 = init_layer(nn.Linear(7 * 7 * 64, 1024), 0.1, 0.1)
        self.fc2 = init_layer(nn.Linear(1024, 10), 0.1, 0.1)

    def forward(self, x):  # [batch, 1, 28, 28]
        # 2x2 stride 2 on 28 and 14: TensorFlow's SAME pads nothing.
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def tf_same_max_pool_3x3_s2(x):
    """tf.nn.max_pool(ksize 3, strides 2, SAME) on an even size: out = in / 2, padded 0 before
    and 1 after (TensorFlow puts the odd padding at the end; padding never wins a max)."""
    return F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 3, 2)


class Cifar10Cnn(nn.Module):
    """The TensorFlow CIFAR-10 tutorial network (cifar10.py's inference()) on 24x24x3 crops:
    conv 5x5x64 + ReLU, max-pool 3x3/2 SAME, LRN, conv 5x5x64 + ReLU, LRN, max-pool 3x3/2 SAME,
    dense 384 + ReLU, dense 192 + ReLU, dense 10; weight decay 0.004 on the two hidden dense
    kernels as an L2 loss term (wd * sum(w^2) / 2), as cifar10.py's _variable_with_weight_decay.
    """

    def __init__(self):
        super().__init__()
        self.conv1 = init_layer(nn.Conv2d(3, 64, 5, padding=2), 5e-2, 0.0)
        self.conv2 = init_layer(nn.Conv2d(64, 64, 5, padding=2), 5e-2, 0.1)
        # tf.nn.lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75) divides by
        # (bias + alpha * sum over 9 channels)^beta; PyTorch's LocalResponseNorm divides alpha by
        # its size: alpha = 0.001 / 9 * 9.
        self.lrn = nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0)
        self.fc1 = init_layer(nn.Linear(6 * 6 * 64, 384), 0.04, 0.1)
        self.fc2 = init_layer(nn.Linear(384, 192), 0.04, 0.1)
        self.fc3 = init_layer(nn.Linear(192, 10), 1.0 / 192.0, 0.0)
        self.weight_decay = 0.004

    def forward(self, x):  # [batch, 3, 24, 24]
        x = self.lrn(tf_same_max_pool_3x3_s2(F.relu(self.conv1(x))))  # [batch, 64, 12, 12]
        x = tf_same_max_pool_3x3_s2(self.lrn(F.relu(self.conv2(x))))  # [batch, 64, 6, 6]
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x)

    def regularization(self):
        return 0.5 * self.weight_decay * (self.fc1.weight.square().sum() +
                                          self.fc2.weight.square().sum())


class PtbLstm(nn.Module):
    """ptb_word_lm.py: embedding, num_layers LSTM layers (dropout on the embedding's and every
    LSTM layer's output when keep_prob < 1), dense to the vocabulary; every variable
    U(-init_scale, init_scale). nn.LSTM (cuDNN) computes BasicLSTMCell with forget_bias 0 (the
    seed's) up to the gate order, with two bias vectors where TensorFlow has one. Time-major."""

    def __init__(self, init_scale, num_layers, hidden_size, keep_prob, vocab_size):
        super().__init__()
        drop = 1.0 - keep_prob
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.dropout = nn.Dropout(drop) if drop > 0 else nn.Identity()
        self.lstm = nn.LSTM(hidden_size, hidden_size, num_layers,
                            dropout=drop if num_layers > 1 else 0.0)
        self.proj = nn.Linear(hidden_size, vocab_size)
        for p in self.parameters():
            nn.init.uniform_(p, -init_scale, init_scale)

    def forward(self, tokens, state):  # tokens [time, batch]
        x = self.dropout(self.embedding(tokens))
        y, state = self.lstm(x, state)
        return self.proj(self.dropout(y)), state  # [time, batch, vocab]


class Subject:
    """One --models item, built on `device`: a step function and the units it trains on."""

    def __init__(self, item, device, channels_last, dtype="fp32"):
        self.item = item
        # Mixed precision as psflow's --dtype: bf16/fp16 products under autocast (which also keeps
        # activations in half: PyTorch's usual recipe), fp16 with a dynamic loss scale.
        self.autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
        self.scaler = (torch.amp.GradScaler(device.type, init_scale=65536.0, growth_interval=2000)
                       if dtype == "fp16" else None)
        name, _, config = item.partition(":")
        self.language_model = name == "ptb_lstm"
        gen = torch.Generator().manual_seed(1)
        pin = device.type == "cuda"
        memory_format = torch.channels_last if channels_last else torch.contiguous_format

        if self.language_model:
            (init_scale, lr, clip, layers, steps, hidden, keep_prob, batch,
             vocab) = PTB_CONFIGS[config or "small"]
            self.model = PtbLstm(init_scale, layers, hidden, keep_prob, vocab).to(device)
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
            self.clip = clip
            self.batch_size, self.time_steps = batch, steps
            # [time, batch] ids and next-word labels, as psflow's synthetic source: uniform ids.
            host = [(torch.randint(0, vocab, (steps, batch), generator=gen),
                     torch.randint(0, vocab, (steps, batch), generator=gen))
                    for _ in range(HOST_BATCHES)]
            zeros = torch.zeros(layers, batch, hidden, device=device)
            self.state = (zeros, zeros.clone())
        else:
            self.time_steps = 1
            self.clip = 0.0
            if name == "mnist_mlp":
                self.model, shape, self.batch_size = MnistMlp(), (784,), 100
                self.optimizer_args = ("sgd", 0.001)
            elif name == "mnist_cnn":
                self.model, shape, self.batch_size = MnistCnn(), (1, 28, 28), 128
                self.optimizer_args = ("adam", 1e-3)
            else:
                self.model, shape, self.batch_size = Cifar10Cnn(), (3, 24, 24), 100
                self.optimizer_args = ("sgd", 0.1)
            self.model = self.model.to(device)
            if len(shape) == 3:
                self.model = self.model.to(memory_format=memory_format)
            kind, lr = self.optimizer_args
            # TensorFlow's Adam defaults (beta1 0.9, beta2 0.999, epsilon 1e-8) are PyTorch's.
            self.optimizer = (torch.optim.Adam(self.model.parameters(), lr=lr) if kind == "adam"
                              else torch.optim.SGD(self.model.parameters(), lr=lr))
            host = []
            for _ in range(HOST_BATCHES):
                x = torch.rand((self.batch_size,) + shape, generator=gen)
                if len(shape) == 3:
                    x = x.contiguous(memory_format=memory_format)
                host.append((x, torch.randint(0, 10, (self.batch_size,), generator=gen)))
        self.host = [(x.pin_memory(), y.pin_memory()) if pin else (x, y) for x, y in host]
        self.device = device
        self.params = [p for p in self.model.parameters()]
        self.next = 0
        self.model.train()

    def units_per_step(self):
        return self.batch_size * self.time_steps

    def step(self):
        x, y = self.host[self.next % len(self.host)]
        self.next += 1
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.optimizer.zero_grad(set_to_none=True)
        # fp32 runs outside autocast: PyTorch 1.13's CPU autocast refuses any dtype but bf16,
        # even disabled.
        with (torch.autocast(self.device.type, dtype=self.autocast) if self.autocast
              else contextlib.nullcontext()):
            loss = self.forward_loss(x, y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            if self.clip > 0:
                nn.utils.clip_grad_norm_(self.params, self.clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return loss
        loss.backward()
        if self.clip > 0:
            nn.utils.clip_grad_norm_(self.params, self.clip)
        self.optimizer.step()
        return loss

    def forward_loss(self, x, y):
        if self.language_model:
            logits, state = self.model(x, self.state)
            # Truncated backpropagation: the next batch starts from this state, no further back.
            self.state = (state[0].detach(), state[1].detach())
            # The seed's cost: cross-entropy summed over the time steps, averaged over the batch.
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                   reduction="sum") / self.batch_size
        else:
            loss = F.cross_entropy(self.model(x), y)
            if isinstance(self.model, Cifar10Cnn):
                loss = loss + self.model.regularization()
        return loss


def set_tf32(allowed):
    """TF32 for matrix products, convolutions and RNNs, all alike. PyTorch >= 2.9 has the
    fp32_precision settings and deprecates the allow_tf32 flags; older ones have only the flags
    (whose default for cuDNN is on)."""
    if hasattr(torch.backends, "fp32_precision"):
        mode = "tf32" if allowed else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
        torch.backends.cudnn.rnn.fp32_precision = mode
    else:
        torch.backends.cuda.matmul.allow_tf32 = allowed
        torch.backends.cudnn.allow_tf32 = allowed


def measure(subject, seconds, repeats, sync):
    """Median rate (examples/s) over `repeats` timed runs of about `seconds` each, after warm-up
    and a calibration that sizes the runs."""
    for _ in range(10):  # first launches, cuDNN's benchmark, the allocator's pools
        subject.step()
    sync()
    steps, elapsed = 5, 0.0
    while elapsed < 0.5 and steps < 1 << 20:  # calibration: at least half a second
        steps *= 2
        start = time.perf_counter()
        for _ in range(steps):
            subject.step()
        sync()
        elapsed = time.perf_counter() - start
    steps = max(20, int(seconds * steps / elapsed))
    rates = []
    loss = None
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            loss = subject.step()
        sync()
        rates.append(steps * subject.batch_size / (time.perf_counter() - start))
    return statistics.median(rates), steps, float(loss)


def parse_models(text):
    items = [m for m in text.split(",") if m]
    for item in items:
        name, _, config = item.partition(":")
        if name == "ptb_lstm":
            if config and config not in PTB_CONFIGS:
                raise argparse.ArgumentTypeError(
                    f'unknown ptb_lstm config "{config}"; known: {", ".join(PTB_CONFIGS)}')
        elif name not in CLASSIFIERS or config:
            raise argparse.ArgumentTypeError(
                f'unknown model "{item}"; known: {", ".join(CLASSIFIERS)}, ptb_lstm[:CONFIG]')
    return items


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=parse_models,
                        default="mnist_cnn,cifar10_cnn,ptb_lstm:small,ptb_lstm:medium,"
                                "ptb_lstm:large",
                        help="comma-separated, as bench_model_throughput's --models")
    parser.add_argument("--seconds", type=float, default=10, help="per timed run")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs (median reported)")
    parser.add_argument("--gpu", type=int, default=0, help="index among the visible GPUs")
    parser.add_argument("--tf32", action="store_true",
                        help="allow TF32 tensor cores for fp32 products, convolutions, RNNs")
    parser.add_argument("--dtype", choices=["fp32", "tf32", "bf16", "fp16"], default="fp32",
                        help="as psflow's --dtype: tf32 = --tf32; bf16/fp16: autocast (fp16 "
                             "with a dynamic loss scale)")
    parser.add_argument("--channels-last", action="store_true",
                        help="CNNs in NHWC memory format (psflow's layout) instead of NCHW")
    parser.add_argument("--cpu", action="store_true",
                        help="run on the CPU (bench_model_throughput's CPU baseline)")
    parser.add_argument("--threads", type=int, default=0,
                        help="--cpu: torch.set_num_threads (0: PyTorch's default, one per core)")
    args = parser.parse_args()
    if isinstance(args.models, str):  # the default is not passed through `type`
        args.models = parse_models(args.models)
    if args.repeats < 1 or args.seconds <= 0:
        parser.error("--repeats must be >= 1 and --seconds > 0")

    if args.cpu:
        device = torch.device("cpu")
        device_name = "CPU"
        if args.threads > 0:
            torch.set_num_threads(args.threads)

        def sync():
            pass
    else:
        if not torch.cuda.is_available():
            print("torch_models.py: PyTorch sees no GPU (use --cpu to check the script)",
                  file=sys.stderr)
            return 1
        if args.gpu >= torch.cuda.device_count():
            print(f"torch_models.py: --gpu={args.gpu}, but PyTorch sees "
                  f"{torch.cuda.device_count()} GPU(s)", file=sys.stderr)
            return 1
        device = torch.device("cuda", args.gpu)
        torch.cuda.set_device(device)
        device_name = torch.cuda.get_device_name(device)

        def sync():
            torch.cuda.synchronize(device)
    if args.dtype == "tf32":
        args.tf32 = True
    set_tf32(args.tf32)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)

    for item in args.models:
        subject = Subject(item, device, args.channels_last, args.dtype)
        examples_per_sec, steps, loss = measure(subject, args.seconds, args.repeats, sync)
        print(json.dumps({
            "model": item,
            "examples_per_sec": round(examples_per_sec, 1),
            "words_per_sec": round(examples_per_sec * subject.time_steps, 1),
            "steps": steps,
            "batch_size": subject.batch_size,
            "loss": round(loss, 4),
            "device": device_name,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
            "tf32": args.tf32,
            "dtype": args.dtype,
            "channels_last": args.channels_last,
        }), flush=True)
        del subject
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
