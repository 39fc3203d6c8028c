package gpugraph_test

import (
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// Tie a resource's lifetime to the graphs that use it, as in the CUDA
// programming guide: the caller's reference moves into the graph, the
// executable graph takes its own, and the destructor runs once the last
// launch that may use the resource has finished, whoever was destroyed
// first. Nothing waits for a destructor: it signals when it is done.
func ExampleGraph_RetainUserObject() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s, _ := dev.NewStream()

	buf := []float32{1, 2, 3} // the resource the graph's work uses
	g, _ := dev.NewGraph()    // a preexisting graph
	g.AddHostNode(func() { fmt.Println("graph reads", buf) })

	freed := make(chan struct{})
	obj, err := dev.NewUserObject(func() {
		buf = nil // free the resource
		close(freed)
	}, 1, gg.UserObjectNoDestructorSync) // 1 reference, owned by the caller
	if err != nil {
		log.Fatal(err)
	}
	// Transfer the caller's reference to the graph: no more references are
	// owned here, so there is nothing to release.
	if err := g.RetainUserObject(obj, 1, gg.GraphUserObjectMove); err != nil {
		log.Fatal(err)
	}
	exec, _ := g.Instantiate(0) // takes a reference of its own
	g.Destroy()                 // exec still owns a reference
	exec.Launch(s)              // the launch may use the resource
	exec.Destroy()              // the launch is not synchronized: the release waits for it
	s.Synchronize()             // after the launch, the last reference goes
	<-freed                     // and the destructor runs, asynchronously
	fmt.Println("freed:", buf == nil)
	// Output:
	// graph reads [1 2 3]
	// freed: true
}
