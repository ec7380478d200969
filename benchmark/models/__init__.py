"""Models and training: the zoo, building a zoo entry's model, fine-tuning, inference, cost, torchrun/DDP."""
