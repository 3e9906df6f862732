// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"
)

// GuardConfig configures the proxy's guard (docs/contract.md section 7):
// on streaming calls, TTFT hedging and failover before the first content
// chunk reaches the client, a stall watchdog after it. Without a guard
// block the proxy forwards every call as it comes.
type GuardConfig struct {
	// StallTimeout ends a stream whose content chunks stop this long after
	// the first one reached the client (keepalives and metadata frames do
	// not count), with the API shape's error frame; 0 is off, auto learns
	// it (AutoStall).
	StallTimeout AutoDuration `mapstructure:"stall_timeout"`
	// ReasoningStallTimeout is the same while only reasoning chunks have
	// come; 0 takes StallTimeout.
	ReasoningStallTimeout AutoDuration `mapstructure:"reasoning_stall_timeout"`
	// TTFTTimeout gives up an attempt without a content chunk this long
	// after it was sent; 0 is off.
	TTFTTimeout time.Duration `mapstructure:"ttft_timeout"`
	Hedge       HedgeConfig   `mapstructure:"hedge"`
	// AutoStall is how stall_timeout: auto is learned.
	AutoStall AutoStallConfig `mapstructure:"auto_stall"`
	// Models override the keys above for the models whose
	// gen_ai.request.model matches a glob; the first match wins.
	Models []ModelGuardConfig `mapstructure:"models"`
	// Advisor, when set, takes the auto values from a hedge_advisor first.
	Advisor configoptional.Optional[AdvisorConfig] `mapstructure:"advisor"`

	_ struct{}
}

// HedgeConfig configures the attempts of a guarded call.
type HedgeConfig struct {
	// Delay starts the next attempt when there is no content chunk this
	// long after the last one started; 0 is off (attempts after the first
	// then start only on failures), auto learns it per model.
	Delay AutoDuration `mapstructure:"delay"`
	// Quantile, FallbackDelay and MinSamples shape delay: auto: the
	// quantile of the proxy's own attempts' time to first content,
	// censoring-aware, FallbackDelay until MinSamples are in.
	Quantile      float64       `mapstructure:"quantile"`
	FallbackDelay time.Duration `mapstructure:"fallback_delay"`
	MinSamples    int           `mapstructure:"min_samples"`
	// MaxAttempts bounds the attempts of a call, the first included.
	MaxAttempts int          `mapstructure:"max_attempts"`
	Budget      BudgetConfig `mapstructure:"budget"`
	// Alternates are other upstreams of the same API shape, tried in
	// order after the primary; without them every attempt goes to the
	// primary.
	Alternates []AlternateConfig `mapstructure:"alternates"`

	_ struct{}
}

// AlternateConfig is an alternate upstream: confighttp client settings
// (with the defaults the primary upstream gets) and what it does with the
// client's credentials (docs/security.md, "Credentials follow the
// upstream").
type AlternateConfig struct {
	confighttp.ClientConfig `mapstructure:",squash"`
	// ForwardClientCredentials sends the alternate the client's credential
	// headers (Authorization, x-api-key, api-key, x-goog-api-key, Cookie,
	// OpenAI-Organization, OpenAI-Project, ...). Without it they reach the
	// primary only, and the alternate has its own in headers or auth.
	ForwardClientCredentials bool `mapstructure:"forward_client_credentials"`
	// ServeCredentialFailures lets the alternate, with a credential of its
	// own, serve calls whose client credential was refused for auth or
	// quota (401, 402, 403, a 429 naming a quota): the operator's
	// credential then pays for them.
	ServeCredentialFailures bool `mapstructure:"serve_credential_failures"`

	_ struct{}
}

// Unmarshal lays the configured keys over the primary upstream's client
// defaults (keep-alive connections among them): a list element would
// otherwise start from the zero ClientConfig, whose keepalive is unset and
// sends every request with Connection: close.
func (a *AlternateConfig) Unmarshal(conf *confmap.Conf) error {
	*a = AlternateConfig{ClientConfig: defaultUpstreamClientConfig()}
	return conf.Unmarshal(a)
}

// ownCredential reports whether the alternate's client settings carry a
// credential of their own: a credential header, an authenticator or a TLS
// client certificate.
func (a *AlternateConfig) ownCredential() bool {
	_, own := ownCredential(&a.ClientConfig)
	return own
}

// ownCredential reports whether upstream client settings carry a
// credential of their own (a credential header, an authenticator or a TLS
// client certificate), and the credential headers they set on every
// request: those in headers, and Authorization for an authenticator (the
// header sigv4auth, oauth2client and bearertokenauth set by default).
func ownCredential(c *confighttp.ClientConfig) (headers []string, own bool) {
	for name := range c.Headers.Iter {
		if guard.IsCredentialHeader(name) {
			headers = append(headers, name)
		}
	}
	if c.Auth.HasValue() {
		headers = append(headers, "Authorization")
	}
	t := &c.TLS
	cert := (t.CertFile != "" || t.CertPem != "") && strings.HasPrefix(strings.ToLower(c.Endpoint), "https:")
	return headers, len(headers) > 0 || cert
}

// BudgetConfig is gRPC's retryThrottling bucket, as the hedge client's, one
// per client (as the hedge_advisor tells clients apart: the authenticated
// client, else its address) under a bucket shared by all of them.
type BudgetConfig struct {
	// MaxTokens is each client's bucket's size; 0 is no budget.
	MaxTokens float64 `mapstructure:"max_tokens"`
	// TokenRatio is what a successful call puts back.
	TokenRatio float64 `mapstructure:"token_ratio"`
	// SharedMaxTokens is the size of the bucket every client's bucket also
	// draws on, so that many clients together stay bounded; 0 is ten times
	// MaxTokens.
	SharedMaxTokens float64 `mapstructure:"shared_max_tokens"`
	// MaxClients bounds the client buckets held, the least recently seen
	// client's dropped first; 0 is 1000.
	MaxClients int `mapstructure:"max_clients"`
	// IPv6PrefixLength is how many leading bits of an IPv6 client address
	// name the client when no authenticator does: 0 is 64, the network
	// one host or home is given; 48 or 56 where clients are given those,
	// 128 for each address on its own.
	IPv6PrefixLength int `mapstructure:"ipv6_prefix_length"`

	_ struct{}
}

// clientBudgets is the configuration of the buckets, the defaults of the
// keys left at 0 applied.
func (b BudgetConfig) clientBudgets() hedgecore.ClientBudgetConfig {
	shared := b.SharedMaxTokens
	if shared == 0 {
		shared = defaultSharedBudgetMultiple * b.MaxTokens
	}
	return hedgecore.ClientBudgetConfig{
		MaxTokens: b.MaxTokens, TokenRatio: b.TokenRatio, SharedMaxTokens: shared, MaxClients: b.MaxClients,
	}
}

// AutoStallConfig shapes a learned stall timeout: Multiple times the
// model's learned p99.9 gap between content chunks, never below Floor nor
// above Ceiling, Floor until MinSamples streams are in.
type AutoStallConfig struct {
	Multiple   float64       `mapstructure:"multiple"`
	Floor      time.Duration `mapstructure:"floor"`
	Ceiling    time.Duration `mapstructure:"ceiling"`
	MinSamples int           `mapstructure:"min_samples"`

	_ struct{}
}

// ModelGuardConfig overrides, for the models Model matches, the keys it
// sets; the others keep the guard's values.
type ModelGuardConfig struct {
	// Model is a glob (path.Match syntax: *, ?, [...]) on
	// gen_ai.request.model, e.g. "o3*" or "*thinking*".
	Model                 string              `mapstructure:"model"`
	StallTimeout          *AutoDuration       `mapstructure:"stall_timeout"`
	ReasoningStallTimeout *AutoDuration       `mapstructure:"reasoning_stall_timeout"`
	TTFTTimeout           *time.Duration      `mapstructure:"ttft_timeout"`
	Hedge                 ModelHedgeOverrides `mapstructure:"hedge"`

	_ struct{}
}

// ModelHedgeOverrides are the hedge keys a model entry may override. A
// budget given here is a bucket of the models it matches alone.
type ModelHedgeOverrides struct {
	Delay         *AutoDuration      `mapstructure:"delay"`
	Quantile      *float64           `mapstructure:"quantile"`
	FallbackDelay *time.Duration     `mapstructure:"fallback_delay"`
	MinSamples    *int               `mapstructure:"min_samples"`
	MaxAttempts   *int               `mapstructure:"max_attempts"`
	Budget        *BudgetConfig      `mapstructure:"budget"`
	Alternates    *[]AlternateConfig `mapstructure:"alternates"`

	_ struct{}
}

// AutoDuration is a duration, or auto: learned from traffic.
type AutoDuration time.Duration

// autoDuration is how auto is held; no configurable duration is negative.
const autoDuration = AutoDuration(math.MinInt64)

// Auto reports whether the duration is to be learned.
func (d AutoDuration) Auto() bool { return d == autoDuration }

// Duration is the configured duration (0 for auto).
func (d AutoDuration) Duration() time.Duration {
	if d.Auto() {
		return 0
	}
	return time.Duration(d)
}

// UnmarshalText reads "auto" or a Go duration.
func (d *AutoDuration) UnmarshalText(b []byte) error {
	if string(b) == "auto" {
		*d = autoDuration
		return nil
	}
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("not auto nor a duration: %w", err)
	}
	*d = AutoDuration(v)
	return nil
}

// MarshalText writes "auto" or the duration.
func (d AutoDuration) MarshalText() ([]byte, error) {
	if d.Auto() {
		return []byte("auto"), nil
	}
	return []byte(time.Duration(d).String()), nil
}

func (d AutoDuration) String() string {
	b, _ := d.MarshalText()
	return string(b)
}

// Defaults of the guard, as docs/contract.md section 7 and the README state.
const (
	defaultHedgeQuantile      = hedgecore.DefaultQuantile
	defaultHedgeFallbackDelay = 2 * time.Second
	defaultHedgeMinSamples    = hedgecore.DefaultMinSamples
	defaultHedgeMaxAttempts   = 2
	// As the hedge client's budget and gRPC's usual retryThrottling.
	defaultBudgetMaxTokens  = 100
	defaultBudgetTokenRatio = 0.1
	// A learned stall timeout is ten times the p99.9 gap and at least 30 s:
	// far above the tail of a healthy stream, so that only real stalls end.
	defaultAutoStallMultiple = 10
	defaultAutoStallFloor    = 30 * time.Second
	// The OpenAI SDKs' own request timeout: a silence longer than that
	// already fails their clients, and a learned timeout past it (a model
	// whose gaps, or a fleet's advice, run to hours) would leave the
	// watchdog off.
	defaultAutoStallCeiling    = 10 * time.Minute
	defaultAutoStallMinSamples = 20
	// gRPC caps maxTokens at 1000.
	maxBudgetTokens = 1000
	// The budget's unit, a thousandth of a token (hedgecore.Budget).
	minBudgetTokens = 0.001
	// The shared bucket holds ten clients' buckets: one client failing
	// alone spends at most half its own of it, and hedging stops for every
	// client only when about ten fail at once.
	defaultSharedBudgetMultiple = 10
	maxSharedBudgetTokens       = 100000
	// A client bucket takes about 200 bytes.
	maxBudgetClients = 100000
)

func defaultGuardConfig() GuardConfig {
	return GuardConfig{
		Hedge: HedgeConfig{
			Quantile:      defaultHedgeQuantile,
			FallbackDelay: defaultHedgeFallbackDelay,
			MinSamples:    defaultHedgeMinSamples,
			MaxAttempts:   defaultHedgeMaxAttempts,
			Budget:        BudgetConfig{MaxTokens: defaultBudgetMaxTokens, TokenRatio: defaultBudgetTokenRatio},
		},
		AutoStall: AutoStallConfig{
			Multiple:   defaultAutoStallMultiple,
			Floor:      defaultAutoStallFloor,
			Ceiling:    defaultAutoStallCeiling,
			MinSamples: defaultAutoStallMinSamples,
		},
		Advisor: configoptional.Default(defaultAdvisorConfig()),
	}
}

var (
	errGuardNegative       = errors.New("must not be negative")
	errEndpointNotAbsURL   = errors.New("endpoint must be an absolute http or https URL")
	errEndpointHasQueries  = errors.New("endpoint must not carry a query or fragment")
	errEndpointHasUserinfo = errors.New("endpoint must not carry credentials (user:password@), " +
		"which the proxy would not send: give them in headers or auth")
	// serve_credential_failures is about the alternate's own credential.
	errServeWithoutCredential = errors.New("serve_credential_failures needs a credential of the alternate's own (a credential header in headers, auth, or a TLS client certificate)")
)

// parseEndpoint reads an alternate upstream's endpoint, as parseUpstream
// reads the primary's.
func parseEndpoint(endpoint string) (*url.URL, error) {
	u, err := parseURL(endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errEndpointNotAbsURL
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errEndpointHasQueries
	}
	if u.User != nil {
		return nil, errEndpointHasUserinfo
	}
	return u, nil
}

// guardRule is the guard's settings for one set of models: the top level,
// or a model entry laid over it.
type guardRule struct {
	StallTimeout          AutoDuration
	ReasoningStallTimeout AutoDuration
	TTFTTimeout           time.Duration
	Delay                 AutoDuration
	Quantile              float64
	FallbackDelay         time.Duration
	MinSamples            int
	MaxAttempts           int
	Budget                BudgetConfig
	// OwnBudget is set when a model entry gives its own budget.
	OwnBudget  bool
	Alternates []AlternateConfig
}

func (g *GuardConfig) rule() guardRule {
	h := &g.Hedge
	return guardRule{
		StallTimeout: g.StallTimeout, ReasoningStallTimeout: g.ReasoningStallTimeout, TTFTTimeout: g.TTFTTimeout,
		Delay: h.Delay, Quantile: h.Quantile, FallbackDelay: h.FallbackDelay, MinSamples: h.MinSamples,
		MaxAttempts: h.MaxAttempts, Budget: h.Budget, Alternates: h.Alternates,
	}
}

// validateDelayUnderTTFT refuses a hedge delay that can never start a
// hedge: an attempt is given up at ttft_timeout, which starts the next one
// at once and arms the delay again from there, so a delay at or past it
// leaves serial failover where a race was asked for. A learned delay's
// fallback is the delay until min_samples are in.
func (r guardRule) validateDelayUnderTTFT(where string) []error {
	if r.TTFTTimeout <= 0 || r.MaxAttempts < 2 {
		return nil
	}
	name, d := "hedge.delay", r.Delay.Duration()
	if r.Delay.Auto() {
		name, d = "hedge.fallback_delay", r.FallbackDelay
	}
	if d < r.TTFTTimeout {
		return nil
	}
	return []error{fmt.Errorf("%s: %s %v must be shorter than ttft_timeout %v: each attempt is given up at ttft_timeout, "+
		"before the delay would start a hedge", where, name, d, r.TTFTTimeout)}
}

// over lays the keys m sets over r.
func (m *ModelGuardConfig) over(r guardRule) guardRule {
	set(&r.StallTimeout, m.StallTimeout)
	set(&r.ReasoningStallTimeout, m.ReasoningStallTimeout)
	set(&r.TTFTTimeout, m.TTFTTimeout)
	h := &m.Hedge
	set(&r.Delay, h.Delay)
	set(&r.Quantile, h.Quantile)
	set(&r.FallbackDelay, h.FallbackDelay)
	set(&r.MinSamples, h.MinSamples)
	set(&r.MaxAttempts, h.MaxAttempts)
	if h.Budget != nil {
		r.Budget, r.OwnBudget = *h.Budget, true
	}
	set(&r.Alternates, h.Alternates)
	return r
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (g *GuardConfig) validate() error {
	errs := []error{g.rule().validate("proxy: guard")}
	if g.Advisor.HasValue() {
		errs = append(errs, g.Advisor.Get().validate())
	}
	a := &g.AutoStall
	if !(a.Multiple >= 1) || math.IsInf(a.Multiple, 0) {
		errs = append(errs, fmt.Errorf("proxy: guard: auto_stall.multiple %v must be a finite number of at least 1", a.Multiple))
	}
	if a.Floor <= 0 {
		errs = append(errs, fmt.Errorf("proxy: guard: auto_stall.floor %w", errPositive))
	}
	if a.Ceiling < a.Floor {
		errs = append(errs, fmt.Errorf("proxy: guard: auto_stall.ceiling %v must be at least auto_stall.floor %v", a.Ceiling, a.Floor))
	}
	if a.MinSamples <= 0 {
		errs = append(errs, fmt.Errorf("proxy: guard: auto_stall.min_samples %w", errPositive))
	}
	firstOf := map[string]int{}
	for i := range g.Models {
		m := &g.Models[i]
		where := fmt.Sprintf("proxy: guard: models[%d]", i)
		if j, seen := firstOf[m.Model]; seen && m.Model != "" {
			errs = append(errs, fmt.Errorf("%s: model %q is models[%d]'s: the first match wins, so this entry would never apply", where, m.Model, j))
		} else {
			firstOf[m.Model] = i
		}
		if m.Model == "" {
			errs = append(errs, fmt.Errorf("%s: model must be a glob on gen_ai.request.model", where))
		} else if _, err := path.Match(m.Model, ""); err != nil {
			errs = append(errs, fmt.Errorf("%s: model %q: %w", where, m.Model, err))
		}
		errs = append(errs, m.over(g.rule()).validate(where))
	}
	return errors.Join(errs...)
}

func (r guardRule) validate(where string) error {
	var errs []error
	negative := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: %s %w", where, name, errGuardNegative))
		}
	}
	negative("stall_timeout", r.StallTimeout.Duration())
	negative("reasoning_stall_timeout", r.ReasoningStallTimeout.Duration())
	negative("ttft_timeout", r.TTFTTimeout)
	negative("hedge.delay", r.Delay.Duration())
	if r.Delay.Auto() {
		if !(r.Quantile > 0 && r.Quantile < 1) {
			errs = append(errs, fmt.Errorf("%s: hedge.quantile %v must be in (0, 1)", where, r.Quantile))
		}
		if r.FallbackDelay <= 0 {
			errs = append(errs, fmt.Errorf("%s: hedge.fallback_delay %w", where, errPositive))
		}
		if r.MinSamples <= 0 {
			errs = append(errs, fmt.Errorf("%s: hedge.min_samples %w", where, errPositive))
		}
	}
	if r.MaxAttempts < 1 || r.MaxAttempts > hedgecore.MaxAttempts {
		errs = append(errs, fmt.Errorf("%s: hedge.max_attempts %d must be between 1 and %d", where, r.MaxAttempts, hedgecore.MaxAttempts))
	}
	errs = append(errs, r.validateDelayUnderTTFT(where)...)
	b := r.Budget
	if !(b.MaxTokens >= 0 && b.MaxTokens <= maxBudgetTokens) {
		errs = append(errs, fmt.Errorf("%s: hedge.budget.max_tokens %v must be between 0 (no budget) and %d", where, b.MaxTokens, maxBudgetTokens))
	}
	if b.MaxTokens > 0 && !(b.TokenRatio > 0 && b.TokenRatio <= b.MaxTokens) {
		errs = append(errs, fmt.Errorf("%s: hedge.budget.token_ratio %v must be positive and at most max_tokens", where, b.TokenRatio))
	}
	// The bucket counts thousandths of a token, as gRPC's retryThrottling
	// does: a smaller bucket could never allow a hedge, a smaller ratio
	// would never refill it.
	if b.MaxTokens > 0 && b.MaxTokens < minBudgetTokens {
		errs = append(errs, fmt.Errorf("%s: hedge.budget.max_tokens %v must be at least %v, the budget's unit, or 0 (no budget)", where, b.MaxTokens, minBudgetTokens))
	}
	if b.MaxTokens > 0 && b.TokenRatio > 0 && b.TokenRatio < minBudgetTokens {
		errs = append(errs, fmt.Errorf("%s: hedge.budget.token_ratio %v must be at least %v, the budget's unit: a smaller one never refills the bucket", where, b.TokenRatio, minBudgetTokens))
	}
	if b.SharedMaxTokens != 0 && !(b.SharedMaxTokens >= b.MaxTokens && b.SharedMaxTokens <= maxSharedBudgetTokens) {
		errs = append(errs, fmt.Errorf("%s: hedge.budget.shared_max_tokens %v must be 0 (%d times max_tokens) or between max_tokens and %d",
			where, b.SharedMaxTokens, defaultSharedBudgetMultiple, maxSharedBudgetTokens))
	}
	if b.MaxClients < 0 || b.MaxClients > maxBudgetClients {
		errs = append(errs, fmt.Errorf("%s: hedge.budget.max_clients %d must be between 0 (%d) and %d",
			where, b.MaxClients, hedgecore.DefaultMaxClients, maxBudgetClients))
	}
	if b.IPv6PrefixLength < 0 || b.IPv6PrefixLength > 128 {
		errs = append(errs, fmt.Errorf("%s: hedge.budget.ipv6_prefix_length %d must be between 0 (%d) and 128",
			where, b.IPv6PrefixLength, guard.DefaultIPv6Prefix))
	}
	for i := range r.Alternates {
		a := &r.Alternates[i]
		if a.Endpoint == "" {
			errs = append(errs, fmt.Errorf("%s: hedge.alternates[%d]: endpoint must be set", where, i))
		} else if _, err := parseEndpoint(a.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("%s: hedge.alternates[%d]: %w", where, i, err))
		}
		if a.ServeCredentialFailures && !a.ownCredential() {
			errs = append(errs, fmt.Errorf("%s: hedge.alternates[%d]: %w", where, i, errServeWithoutCredential))
		}
		errs = append(errs, checkClient(fmt.Sprintf("%s: hedge.alternates[%d]", where, i), &a.ClientConfig)...)
	}
	return errors.Join(errs...)
}
