"""`python -m keras_transformer.pipelines`: the pipelines command (`keras_transformer.commands.pipelines`; also `kt-pipelines`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("pipelines")
