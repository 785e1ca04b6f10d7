"""The parts of the GPU check (:mod:`benchmarks.gpu_check`), one module each, and what they share."""
