package backendtest

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Open returns a fresh device of the backend under test, closed when the
// test ends; it calls t.Skip when the backend is not available.
type Open func(t testing.TB) *gg.Device

// Run runs every scenario as a subtest of t, each on a device of its own.
func Run(t *testing.T, open Open) {
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { s.run(t, open(t)) })
	}
}

// scenarios are the suite, by topic; a name is the subtest's.
var scenarios = []struct {
	name string
	run  func(t *testing.T, d *gg.Device)
}{
	// graph.go
	{"GraphOrder", graphOrder},
	{"EventsAcrossStreams", eventsAcrossStreams},
	{"InvalidCalls", invalidCalls},
	{"StreamLaunchRechecks", streamLaunchRechecks},
	{"SetParams", setParams},
	{"EditEmbeddedGraph", editEmbeddedGraph},
	// capture.go
	{"CaptureForkJoin", captureForkJoin},
	{"CaptureErrors", captureErrors},
	{"CaptureToGraphAndClone", captureToGraphAndClone},
	{"CaptureLaunchAndInvalidation", captureLaunchAndInvalidation},
	{"CaptureInstantiateProhibited", captureInstantiateProhibited},
	{"CaptureExternalEvents", captureExternalEvents},
	// streams.go
	{"DefaultStreamOrder", defaultStreamOrder},
	{"LegacySynchronizeCoversBlocking", legacySynchronizeCoversBlocking},
	{"DefaultStreamCapture", defaultStreamCapture},
	// memory.go
	{"MemoryNodes", memoryNodes},
	{"TwoStreams", twoStreams},
	{"MemPools", memPools},
	{"MemcpyForeignAllocation", memcpyForeignAllocation},
	{"ExecSetParamsGraphMemSource", execSetParamsGraphMemSource},
	// hostmem.go
	{"PinnedHostMemory", pinnedHostMemory},
	{"PinnedStreamCopies", pinnedStreamCopies},
	{"PinnedGraphCopies", pinnedGraphCopies},
	{"PageableCopyChain", pageableCopyChain},
	// conditional.go
	{"ConditionalIf", conditionalIf},
	{"ConditionalIfElse", conditionalIfElse},
	{"ConditionalDoWhile", whileScenario},
	{"ConditionalCapturedWhile", capturedWhileScenario},
	{"ConditionalSwitch", switchScenario},
	{"ConditionalNested", nestedScenario},
	{"ConditionalAssignDefault", conditionalAssignDefault},
	{"ConditionalRules", conditionalRules},
	{"ConditionalLoopsSideBySide", loopsSideBySide},
	// update.go
	{"WholeGraphUpdate", wholeGraphUpdate},
	{"UpdateRefusals", updateRefusals},
	{"ExecNodeSetParams", execNodeSetParams},
	{"SetEnabled", setEnabled},
	{"SetEnabledNested", setEnabledNested},
	{"UpdateConditionalBodies", updateConditionalBodies},
	{"SetChildGraph", setChildGraph},
	// memupdate.go
	{"UpdateMemNodes", updateMemNodes},
	{"UpdateMemNodesMemset", updateMemsetRefused},
	{"UpdateRefusalOrder", updateRefusalOrder},
	{"UpdateMemNodesLeftLive", updateMemNodesLeftLive},
	// userobject.go
	{"UserObjectDeferredRelease", userObjectDeferredRelease},
	{"UserObjectInvalid", userObjectInvalid},
	{"UserObjectClone", userObjectClone},
	{"UserObjectChildGraph", userObjectChildGraph},
	{"UserObjectDestructorCallsAPI", userObjectDestructorCallsAPI},
	// devlaunch.go
	{"DeviceLaunchInstantiate", deviceLaunchInstantiate},
	{"DeviceLaunchModes", deviceLaunchModes},
	{"DeviceLaunchSelfTail", deviceLaunchSelfTail},
	{"DeviceLaunchRefused", deviceLaunchRefused},
	{"DeviceLaunchUpload", deviceLaunchUpload},
	{"DeviceLaunchCurrentGraphExec", deviceLaunchCurrentGraphExec},
	{"DeviceLaunchKernelInStream", deviceLaunchKernelInStream},
	// edgedata.go
	{"EdgeDataRoundTrip", edgeDataRoundTrip},
	{"EdgeDataRules", edgeDataRules},
	{"EdgeDataCapture", edgeDataCapture},
	{"EdgeDataProgrammaticLaunch", edgeDataProgrammaticLaunch},
	// extsem.go
	{"ExternalSemaphoreSources", externalSemaphoreSources},
	{"ExternalSemaphoreArgs", externalSemaphoreArgs},
	{"ExternalSemaphoreSignalWait", externalSemaphoreSignalWait},
	// replay.go
	{"CaptureReplay", captureReplay},
	// determinism.go
	{"GraphMemUploadAtCall", graphMemUploadAtCall},
	{"GraphMemStreamSwitchAtCall", graphMemStreamSwitchAtCall},
	{"GraphMemFreedCountsUntilTrim", graphMemFreedCountsUntilTrim},
	{"GraphMemAutoFreeOneLaunch", graphMemAutoFreeOneLaunch},
}
