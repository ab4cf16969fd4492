// stub
import type { Section } from './section.js';
export const serviceSection: Section<null> = { name: 'service', run: async () => null, render: () => [] };
