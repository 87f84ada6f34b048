// Package clock is the time source of the replica state machine. Production
// code gets Real; tests get a Manual clock they advance by hand, so no test
// sleeps and every timing decision (ISR lag, request time-outs) is repeatable.
package clock
