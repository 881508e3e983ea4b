"""The operators the algorithms apply besides gradients: the regularizer h with its prox, and the
compressors C."""
