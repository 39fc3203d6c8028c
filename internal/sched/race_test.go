//go:build race

package sched

// raceEnabled: the race detector slows every node and every scheduler step
// by microseconds, which moves grains and run times.
const raceEnabled = true
