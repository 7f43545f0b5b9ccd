"""Tests of tasks, the commands' work (training, its child process, Table 3's variations); tasks.parsing in parsing/."""
