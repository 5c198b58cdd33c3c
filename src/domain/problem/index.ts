export { PROBLEM_CATALOG, type ProblemCode } from './catalog';
export { ProblemError, isProblemError, toProblem, type ProblemBody, type ProblemExtensions } from './problem-error';
export { problems } from './problems';
