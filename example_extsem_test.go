package gpugraph_test

import (
	"context"
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// A graph waits on an external semaphore that a goroutine signals, and
// signals it back when done: Go code and the device's work hand off in
// both directions, as a Vulkan renderer and CUDA do with a timeline
// semaphore.
func ExampleExternalSemaphore() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	sem, err := dev.NewExternalSemaphore()
	if err != nil {
		log.Fatal(err)
	}
	s, _ := dev.NewStream()
	g, _ := dev.NewGraph()
	sems := []*gg.ExternalSemaphore{sem}
	wait, _ := g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: sems, Values: []uint64{1}})
	work, _ := g.AddHostNode(func() { fmt.Println("graph: runs after value 1") }, wait)
	if _, err := g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: sems, Values: []uint64{2}}, work); err != nil {
		log.Fatal(err)
	}
	e, err := g.Instantiate(0)
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Launch(s); err != nil { // returns at once; the launch waits
		log.Fatal(err)
	}
	go func() {
		fmt.Println("goroutine: signals 1")
		sem.Signal(1)
	}()
	if err := sem.Wait(context.Background(), 2); err != nil {
		log.Fatal(err)
	}
	v, _ := sem.Value()
	fmt.Println("main: value", v)
	// Output:
	// goroutine: signals 1
	// graph: runs after value 1
	// main: value 2
}
