import { Eta } from 'eta';
import { join } from 'node:path';
import { directionOf, type Locale, type Translate } from '../plugins/i18n.js';

/**
 * Renders a mail from `views/emails/<template>.text.eta` and `.html.eta` in the recipient's language
 * (strings come from the locale messages, keys `mail.<template>.*`). The HTML is auto-escaped; the
 * text part is not (it is plain text).
 */
export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

export class MailRenderer {
  private readonly html: Eta;
  private readonly text: Eta;

  constructor(viewsDir: string, production: boolean) {
    const views = join(viewsDir, 'emails');
    this.html = new Eta({ views, autoEscape: true, cache: production, autoTrim: false });
    this.text = new Eta({ views, autoEscape: false, cache: production, autoTrim: false });
  }

  render(template: string, locale: Locale, t: Translate, params: Record<string, string | number>): RenderedMail {
    if (!/^[a-z][a-z0-9_-]*$/.test(template)) throw new Error(`bad mail template name ${template}`);
    const subject = t(`mail.${template}.subject`, params);
    // The HTML `<title>` is the subject with its parameters filled in (a code, an app name).
    const locals = { ...params, t, locale, dir: directionOf(locale), params, subject };
    const text = this.text.render(`./${template}.text.eta`, locals);
    return {
      subject,
      // The app's name heads the text part as it heads the HTML one (_layout.html.eta).
      text: typeof params.brandName === 'string' && params.brandName ? `${params.brandName}\n\n${text}` : text,
      html: this.html.render(`./${template}.html.eta`, locals),
    };
  }
}
