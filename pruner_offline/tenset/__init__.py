"""TVM-free readers for TenSet datasets: records, task pickles, compute graphs, labels, splits."""
