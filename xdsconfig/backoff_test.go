package xdsconfig

import (
	"testing"
	"time"
)

func TestDefaultBackoffNeverGrowsAsInEnvoyRatelimit(t *testing.T) {
	for n := range 10 {
		for _, rnd := range []float64{0, 0.5, 0.999} {
			if d := DefaultBackoff.Delay(n, rnd); d != 10*time.Second {
				t.Errorf("attempt %d, rnd %v: %v, want 10s (a factor of 0.5 never grows it)", n, rnd, d)
			}
		}
	}
}

func TestBackoffGrowsByItsFactorUpToMax(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 10 * time.Second, Factor: 2}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for n, w := range want {
		if d := b.Delay(n, 0.9); d != w {
			t.Errorf("attempt %d: %v, want %v", n, d, w)
		}
	}
}

func TestBackoffJitterDrawsBetweenInitialAndTheGrownWait(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute, Factor: 2, Jitter: true}
	if d := b.Delay(3, 0); d != time.Second {
		t.Errorf("rnd 0: %v, want the initial 1s", d)
	}
	if d := b.Delay(3, 0.5); d != 4500*time.Millisecond {
		t.Errorf("rnd 0.5: %v, want halfway between 1s and 8s", d)
	}
}

func TestZeroBackoffWaitsTheDefaultInitial(t *testing.T) {
	if d := (Backoff{}).Delay(5, 0.3); d != 10*time.Second {
		t.Errorf("zero Backoff: %v, want 10s", d)
	}
}

func TestConnectRetryVariesByHalfEitherWay(t *testing.T) {
	for rnd, want := range map[float64]time.Duration{0: 1500 * time.Millisecond, 0.5: 3 * time.Second, 0.999: 4497 * time.Millisecond} {
		if d := jittered(3*time.Second, rnd); d != want {
			t.Errorf("rnd %v: %v, want %v", rnd, d, want)
		}
	}
}
