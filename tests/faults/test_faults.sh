#!/bin/sh
# SPDX-License-Identifier: MIT
# The default suite's sample of the fault-injection suite: 2 trials of each fault kind
# (make check-faults runs 100).
exec "$(dirname "$0")/check-faults.sh" 2
