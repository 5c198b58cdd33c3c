/**
 * Write-time bounds on what one grant compiles to (#11.32). A scoped grant has one rule per permission code
 * and scope group, so an unbounded template × scope list (1,000 × 900) compiled to 900,000 rules, 1.4 s of
 * event loop and ~160 MB. With these bounds the worst grant is 256 × 128 = 32,768 rules (~30 ms, ~8 MB);
 * typical grants are a few dozen rules. Writes over a bound are 400 IAM_VALIDATION_FAILED (admin API,
 * provisioning file, authenticator projections).
 */
export const MAX_TEMPLATE_PERMISSIONS = 256;
export const MAX_PROFILE_SCOPES = 128;
