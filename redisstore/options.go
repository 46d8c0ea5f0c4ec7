package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/safefile"
)

// TLSFiles names the PEM files of TLS connections to Redis, as
// envoyproxy/ratelimit's REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY,
// REDIS_TLS_CACERT and REDIS_TLS_SKIP_HOSTNAME_VERIFICATION do. The zero
// value is the system's authorities, no client certificate, the name
// checked.
type TLSFiles struct {
	// CertFile and KeyFile are a client certificate and its key, for a
	// Redis that requires one; both or neither.
	CertFile, KeyFile string
	// CAFile holds the authorities that sign Redis's certificate; "" is
	// the system's.
	CAFile string
	// SkipHostnameVerification accepts a certificate whose names do not
	// include the host of the URL. Its chain is still verified against
	// the authorities.
	SkipHostnameVerification bool
}

// tlsReadTimeout bounds reading LoadTLS's files.
const tlsReadTimeout = 10 * time.Second

// LoadTLS reads f's files into a tls.Config for Config.TLS. Each must be a
// regular file (a FIFO or a device is refused at once, not waited on) of at
// most 1 MiB, and all are read within 10 s. An error names the file it could
// not use.
func LoadTLS(f TLSFiles) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("redisstore: a client certificate needs both its certificate and its key file")
	}
	ctx, cancel := context.WithTimeout(context.Background(), tlsReadTimeout)
	defer cancel()
	if f.CertFile != "" {
		cert, err := safefile.ReadKeyPair(ctx, f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("redisstore: client certificate: %w", err) // err names the file(s)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if f.CAFile != "" {
		pem, err := safefile.Read(ctx, f.CAFile, safefile.MaxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("redisstore: certificate authorities: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisstore: certificate authorities %s: no PEM certificate in it", f.CAFile)
		}
	}
	if f.SkipHostnameVerification {
		// Go's own verification checks the name with the chain; it is
		// turned off, and the chain verified here without the name.
		roots := c.RootCAs
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("redisstore: Redis presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return c, nil
}

// clientOption returns the rueidis options of cfg, whose URL is set.
func clientOption(cfg Config) (rueidis.ClientOption, error) {
	opt, err := ParseURL(cfg.URL)
	if err != nil {
		return opt, err
	}
	if opt.TLSConfig != nil && cfg.TLS != nil {
		c := cfg.TLS.Clone()
		if c.ServerName == "" {
			c.ServerName = opt.TLSConfig.ServerName
		}
		opt.TLSConfig = c
	}
	switch {
	case cfg.Connections < 0:
		return opt, fmt.Errorf("redisstore: Connections %d is negative", cfg.Connections)
	case cfg.Connections == 1:
		opt.PipelineMultiplex = -1 // rueidis: one connection (0 is its default)
	case cfg.Connections > 1:
		opt.PipelineMultiplex = min(bits.Len(uint(cfg.Connections))-1, rueidis.MaxPipelineMultiplex)
	}
	if cfg.FlushDelay < 0 {
		return opt, fmt.Errorf("redisstore: FlushDelay %v is negative", cfg.FlushDelay)
	}
	opt.MaxFlushDelay = cfg.FlushDelay
	switch {
	case cfg.Timeout < 0:
		return opt, fmt.Errorf("redisstore: Timeout %v is negative", cfg.Timeout)
	case cfg.Timeout > 0:
		opt.Dialer.Timeout, opt.ConnWriteTimeout = cfg.Timeout, cfg.Timeout
	}
	if cfg.SentinelUsername != "" || cfg.SentinelPassword != "" {
		opt.Sentinel.Username, opt.Sentinel.Password = cfg.SentinelUsername, cfg.SentinelPassword
	}
	return opt, nil
}

// clientOnly returns an error naming the first option of cfg, whose Client
// is set, that says how to connect: the client is connected already.
func clientOnly(cfg Config) error {
	for _, o := range []struct {
		name string
		set  bool
	}{
		{"URL", cfg.URL != ""},
		{"TLS", cfg.TLS != nil},
		{"Connections", cfg.Connections != 0},
		{"FlushDelay", cfg.FlushDelay != 0},
		{"Timeout", cfg.Timeout != 0},
		{"SentinelUsername", cfg.SentinelUsername != ""},
		{"SentinelPassword", cfg.SentinelPassword != ""},
	} {
		if o.set {
			return fmt.Errorf("redisstore: %s is set with Client: the client's own connection options apply", o.name)
		}
	}
	return nil
}
