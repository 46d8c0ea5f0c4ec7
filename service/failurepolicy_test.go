package service_test

import (
	"testing"

	"github.com/sluicehq/sluice/service"
)

// TestFailurePolicyRefusesPrimary: a FailurePolicy is a failsafe.Config,
// whose Primary the Service fills with Config.Limiter; one set by the
// caller would be ignored, so it is refused.
func TestFailurePolicyRefusesPrimary(t *testing.T) {
	_, err := service.New(service.Config{Limiter: failing{}, Failure: &service.FailurePolicy{Primary: failing{}}, Logger: discard()})
	if err == nil {
		t.Fatal("a FailurePolicy with a Primary was accepted")
	}
}
