"""Word count: the quick start's job. Generates lines of words, splits them, counts each word
with a keyed sum across TaskExecutors, and writes the counts as JSON lines.

    yarnflink run examples/wordcount.py [--lines N] [--output DIR]
"""

import argparse
import glob
import json
import os

from yarnflink import FileSink, RuntimeExecutionMode, StreamExecutionEnvironment

WORDS = ["apache", "flink", "yarn", "python", "arrow", "stream", "state", "slot", "task", "graph"]

parser = argparse.ArgumentParser()
parser.add_argument("--lines", type=int, default=100_000)
parser.add_argument("--output", default="out/wordcount")
args = parser.parse_args()

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)  # BATCH: one final count per word
env.set_parallelism(2)

lines = (
    env.from_sequence(1, args.lines)
    .map(lambda i: " ".join(WORDS[(i * k + k * k) % len(WORDS)] for k in range(1, 11)))
    .name("Lines")
)
counts = (
    lines.flat_map(lambda line: [(w, 1) for w in line.split()])
    .name("Tokenizer")
    .key_by(lambda pair: pair[0])
    .sum(1)
    .name("Count")
)
counts.sink_to(FileSink(args.output, format="jsonl"))
result = env.execute("WordCount")

totals = {}
for part in sorted(glob.glob(os.path.join(args.output, "part-*"))):
    with open(part) as f:
        for line in f:
            word, n = json.loads(line)
            totals[word] = n
print(f"WordCount finished in {result.get_net_runtime()} ms; {sum(totals.values())} words:")
for word, n in sorted(totals.items(), key=lambda kv: -kv[1]):
    print(f"  {word:<8} {n}")
