#!/bin/bash
# Prints a greeting for the name given as the first argument.
echo "Hello, $name!"
