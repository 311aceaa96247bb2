"""Training at scale: DDP gather, cross-batch memory, multistage backprop."""
