"""`python -m keras_transformer.average_checkpoints`: the average_checkpoints command (`keras_transformer.commands.average_checkpoints`; also `kt-average-checkpoints`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("average_checkpoints")
